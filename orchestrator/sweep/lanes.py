"""The hosts of a sweep and the lanes they run: one host is a pool of one, several share their cells.

Hosts with the same SGLang version and GPU type form one lane and share one queue of cells: a host
takes the next cell that fits its free GPUs, so a fast host does more of them, and a host that goes
down leaves what is still queued to the others (its cells in flight are `infra`, retried elsewhere
when the matrix allows retries). Hosts that differ are not averaged together: each lane runs every
cell, and the lane is an axis of the matrix (the cell's `host`), as an install is.

Every run records the host it ran on, so the table, compare, explain and `--resume` see it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from orchestrator.classify.unlaunched import gpus_unavailable_verdict
from orchestrator.config.model import HostConfig
from orchestrator.errors import OrchestratorError
from orchestrator.host.lock import HostLocks
from orchestrator.host.session import HostSession
from orchestrator.matrix.expand import cell_id
from orchestrator.model import Cell
from orchestrator.planning.cells import CellPlan
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult, record_unlaunched
from orchestrator.sweep.connect import open_host
from orchestrator.sweep.hostdown import Announce, HostWatch
from orchestrator.sweep.preflight import Preflight, run_preflight
from orchestrator.sweep.scheduler import Job, Scheduler
from orchestrator.transport import HostBreaker

T = TypeVar("T")
MAX_ROUNDS = 3
"""Turns the hosts still up get at cells left queued (see run_lanes); what even they leave is recorded."""


@dataclass
class Member:
    """One host of the sweep: its connection, lock and preflight, or why it could not join."""

    config: HostConfig
    breaker: HostBreaker
    session: HostSession | None = None
    locks: HostLocks | None = None
    preflight: Preflight | None = None
    error: OrchestratorError | None = None
    stopped: bool = False

    @property
    def name(self) -> str:
        """The host's name in hosts.yaml."""
        return self.config.name

    def open_session(self) -> HostSession:
        """Another connection to this host, sharing its breaker."""
        return open_host(self.config, self.breaker)

    def hold(self, sweep_id: str) -> HostSession:
        """Connect and take the host's locks for `sweep_id` (host/lock.HostLocks: a second sweep is refused naming
        the first)."""
        self.session = open_host(self.config, self.breaker)
        locks = HostLocks(self.session.transport, self.session.workdir, sweep_id, self.session.placement.gpu_uuids())
        locks.acquire()
        self.locks = locks
        return self.session

    def leave(self) -> None:
        """Give the locks back (a host that is down keeps them for the resume) and close the connection."""
        locks, self.locks = self.locks, None
        if locks is not None:
            with contextlib.suppress(OrchestratorError):
                locks.release()
        if self.session is not None:
            self.session.close()
            self.session = None


@dataclass
class Lane:
    """Hosts that are alike (SGLang version, GPU type): they share one queue of cells."""

    name: str
    """The cell's `host` when hosts differ (the host axis); empty when the whole pool is one lane."""
    key: tuple[str, str, str]
    """SGLang version, GPU type, install build."""
    members: list[Member]
    plans: list[CellPlan] = field(default_factory=list)
    queue: deque[Job] = field(default_factory=deque)
    preflight: Preflight | None = None
    """The lane's preflight of every cell it may run (its plans laned)."""

    @property
    def first(self) -> Member:
        """The member whose name a lane's unlaunched verdicts (invalid, skipped) are recorded under."""
        return self.members[0]


def lane_key(preflight: Preflight) -> tuple[str, str, str]:
    """What hosts must share to be pooled: the SGLang version, the GPU type and the install's build (two nightlies
    with one version string are two installs)."""
    versions, facts = preflight.versions, preflight.host_facts
    return (
        str(versions.get("sglang") or "?"),
        str(facts.get("gpu_name") or "?"),
        str(versions.get("sglang-build") or ""),
    )


def pool_lanes(members: Sequence[Member]) -> list[Lane]:
    """The reachable members grouped into lanes, in the order the hosts were given."""
    lanes: dict[tuple[str, str, str], Lane] = {}
    for member in members:
        if member.preflight is None:
            continue
        key = lane_key(member.preflight)
        lanes.setdefault(key, Lane("", key, [])).members.append(member)
    found = list(lanes.values())
    if len(found) > 1:
        for lane in found:
            lane.name = "+".join(m.name for m in lane.members)
    return found


def laned(cell: Cell, lane: str) -> Cell:
    """The cell on one lane of the host axis (its own id, `host=` in its label); unchanged for no lane."""
    if not lane:
        return cell
    return dataclasses.replace(cell, cell_id=cell_id(cell.flags, cell.install, lane), host=lane)


def join_hosts(members: list[Member], cells: list[Cell], sweep_id: str, on_host: Announce) -> list[Lane]:
    """Hold and preflight every host at once; the lanes of those that joined (raises when none could).

    A host that fails any of it stays out of the sweep, said once; a single host's failure is the sweep's.
    """

    def join(member: Member) -> None:
        try:
            member.preflight = run_preflight(member.hold(sweep_id), cells)
        except OrchestratorError as exc:
            member.error = exc
            member.leave()

    each(members, join)
    ready = [m for m in members if m.preflight is not None]
    if not ready:
        raise next(m.error for m in members if m.error is not None)
    for member in members:
        if member.error is not None:
            on_host(member.name, f"host {member.name} left out of the pool: {member.error}")
    lanes = pool_lanes(ready)
    if len(lanes) > 1:
        on_host("", "hosts differ, so the host is an axis: " + "; ".join(
            f"{lane.name} (sglang {lane.key[0]}{f' build {lane.key[2]}' if lane.key[2] else ''}, {lane.key[1]})"
            for lane in lanes
        ))  # fmt: skip
    return lanes


@dataclass(frozen=True)
class LaneRun:
    """What every scheduler of a sweep shares (one per host, built by run_lanes)."""

    store: Store
    sweep_id: str
    make_scheduler: Callable[[Member, bool, HostWatch], Scheduler]
    wait_for_host_s: float
    on_host: Announce
    on_result: Callable[[AttemptResult], None] | None


def run_lanes(run: LaneRun, lanes: Sequence[Lane]) -> bool:
    """One scheduler per host, the hosts of a lane sharing its queue; then what no host could run is recorded.

    True when an infra verdict stopped the sweep.
    """
    watches: dict[str, HostWatch] = {}
    pooled = sum(len(lane.members) for lane in lanes) > 1

    def go(pair: tuple[Member, Lane]) -> None:
        member, lane = pair
        assert member.session is not None
        session = member.session
        watch = HostWatch(
            member.name, member.breaker, wait_s=run.wait_for_host_s,
            check=lambda: session.transport.run("true", timeout=10.0), announce=run.on_host, pooled=pooled,
        )  # fmt: skip
        watches[member.name] = watch
        scheduler = run.make_scheduler(member, pooled, watch)
        scheduler.run(lane.queue)
        member.stopped = member.stopped or scheduler.stopped is not None

    def start_nothing_more() -> None:
        for lane in lanes:
            lane.queue.clear()

    pairs = [(m, lane) for lane in lanes for m in lane.members]
    for _ in range(MAX_ROUNDS):
        each(pairs, go, reraise=True, interrupted=start_nothing_more)
        # A host that ended while another still ran may have missed a retry that one queued later, before it
        # went down: the hosts still up take another turn at what is left.
        pairs = [(m, lane) for m, lane in pairs if lane.queue and m.breaker.tripped is None and not m.stopped]
        if not pairs:
            break
    for lane in lanes:
        down = [m for m in lane.members if m.breaker.tripped is not None]
        while lane.queue:
            job = lane.queue.popleft()
            host = lane.first.name
            if down and len(down) == len(lane.members):
                verdict = watches[down[0].name].down_verdict()
                host = down[0].name
            else:
                verdict = gpus_unavailable_verdict(
                    f"not launched: needs {job.plan.cell.tp_size} GPUs, and no host of the pool has that many usable"
                )
            record_unlaunched(run.store, run.sweep_id, host, job.plan.cell, verdict, run.on_result)
    return any(m.stopped for lane in lanes for m in lane.members)


def each(
    items: Sequence[T],
    work: Callable[[T], None],
    *,
    reraise: bool = False,
    interrupted: Callable[[], object] = lambda: None,
) -> None:
    """`work` on every item at once, one thread each; with `reraise`, the first exception is raised after all end.

    A signal in the waiting thread (Ctrl-C) calls `interrupted` (so the threads start nothing new), waits for
    every thread to end, then goes on unwinding: nothing may run on behind a sweep that is stopping.
    """
    if len(items) == 1:  # in this thread: a signal unwinds through the work itself (it cancels batch jobs)
        try:
            work(items[0])
        except OrchestratorError:
            if reraise:
                raise
        return
    errors: list[BaseException] = []

    def guarded(item: T) -> None:
        try:
            work(item)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(item,), name="sweep-host") for item in items]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:
        interrupted()
        for thread in threads:
            thread.join()
        raise
    if errors and (reraise or not isinstance(errors[0], OrchestratorError)):
        raise errors[0]
