"""A pool of hosts in one sweep: the cells spread across the hosts, each host packing its GPUs as when alone.

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
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from orchestrator.classify.unlaunched import gpus_unavailable_verdict
from orchestrator.config.model import HostConfig, Matrix
from orchestrator.errors import OrchestratorError, TransportError
from orchestrator.host.lock import HostLock
from orchestrator.host.session import HostSession
from orchestrator.matrix.expand import cell_id, expand
from orchestrator.model import Cell
from orchestrator.store.records import SweepRecord, new_sweep_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.agreement import review_answers
from orchestrator.sweep.cell_run import AttemptResult, Slot, record_unlaunched
from orchestrator.sweep.hostdown import HostWatch
from orchestrator.sweep.plan import CellPlan
from orchestrator.sweep.preflight import Preflight, run_preflight
from orchestrator.sweep.recover import (
    finished_runs,
    jobs_left,
    our_pgids,
    reap_orphans,
    record_invalid,
    settle_in_flight,
)
from orchestrator.sweep.runner import SweepHooks, SweepOptions, host_watch, release_lock, sweep_settings
from orchestrator.sweep.scheduler import Job, Scheduler
from orchestrator.transport import HostBreaker

T = TypeVar("T")
MAX_ROUNDS = 3
"""Turns the hosts still up get at cells left queued (see _run_lanes); what even they leave is recorded."""


@dataclass
class Member:
    """One host of the pool: its connection, lock and preflight, or why it could not join."""

    config: HostConfig
    breaker: HostBreaker
    session: HostSession | None = None
    lock: HostLock | None = None
    preflight: Preflight | None = None
    error: OrchestratorError | None = None
    stopped: bool = False

    @property
    def name(self) -> str:
        """The host's name in hosts.yaml."""
        return self.config.name

    def open_session(self) -> HostSession:
        """Another connection to this host (one per worker thread), sharing its breaker."""
        return HostSession.open(self.config, self.breaker)


@dataclass
class Lane:
    """Hosts that are alike (SGLang version, GPU type): they share one queue of cells."""

    name: str
    """The cell's `host` when hosts differ (the host axis); empty when the whole pool is one lane."""
    key: tuple[str, str]
    members: list[Member]
    plans: list[CellPlan] = field(default_factory=list)
    queue: deque[Job] = field(default_factory=deque)


def lane_key(preflight: Preflight) -> tuple[str, str]:
    """What hosts must share to be pooled: the SGLang version and the GPU type."""
    return str(preflight.versions.get("sglang") or "?"), str(preflight.host_facts.get("gpu_name") or "?")


def pool_lanes(members: Sequence[Member]) -> list[Lane]:
    """The reachable members grouped into lanes, in the order the hosts were given."""
    lanes: dict[tuple[str, str], Lane] = {}
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


def start_pool_sweep(
    store: Store, matrix: Matrix, hosts: Sequence[HostConfig], options: SweepOptions, hooks: SweepHooks
) -> str:
    """Run a new sweep of `matrix` across `hosts`; returns its id. Raises when no host is reachable."""
    cells = expand(matrix)
    sweep_id = new_sweep_id()
    members = [Member(h, HostBreaker(h.name)) for h in hosts]
    try:
        _each(members, lambda m: _join(m, cells, sweep_id))
        ready = [m for m in members if m.preflight is not None]
        if not ready:
            raise next(m.error for m in members if m.error is not None)
        for member in members:
            if member.error is not None:
                hooks.on_host(member.name, f"host {member.name} left out of the pool: {member.error}")
        lanes = pool_lanes(ready)
        if len(lanes) > 1:
            hooks.on_host("", "hosts differ, so the host is an axis: " + "; ".join(
                f"{lane.name} (sglang {lane.key[0]}, {lane.key[1]})" for lane in lanes
            ))  # fmt: skip
        all_cells: list[Cell] = []
        for lane in lanes:
            first = lane.members[0].preflight
            assert first is not None
            lane.plans = [dataclasses.replace(p, cell=laned(p.cell, lane.name)) for p in first.plans]
            all_cells += [p.cell for p in lane.plans]
        assert ready[0].preflight is not None
        hooks.on_plan(dataclasses.replace(ready[0].preflight, plans=[p for lane in lanes for p in lane.plans]))
        store.create_sweep(_record(sweep_id, matrix, members, lanes, options, len(all_cells)))
        store.save_cells(sweep_id, all_cells, "matrix")
        hooks.on_start(sweep_id)
        for lane in lanes:
            for plan in lane.plans:
                if not plan.ok:
                    record_invalid(store, sweep_id, lane.members[0].name, plan)
            lane.queue.extend(Job(p, 1) for p in lane.plans if p.ok)
        _run_and_finish(store, sweep_id, matrix, lanes, options, hooks)
        return sweep_id
    finally:
        _leave(members)


def resume_pool_sweep(
    store: Store, sweep_ref: str, matrix: Matrix, hosts: Sequence[HostConfig], options: SweepOptions,
    hooks: SweepHooks,
) -> str:  # fmt: skip
    """Finish an interrupted pool sweep: each host settles the runs that were on it, then the cells left run."""
    record = store.resolve_sweep(sweep_ref)
    sweep_id = record.sweep_id
    cells = store.get_cells(sweep_id)
    recorded: dict[str, list[str]] = record.settings.get("lanes") or {"": [h.name for h in hosts]}
    members = [Member(h, HostBreaker(h.name)) for h in hosts]
    try:
        store.reopen_sweep(sweep_id)
        hooks.on_start(sweep_id)
        _each(members, lambda m: _rejoin(store, m, sweep_id, options, hooks))
        ready = [m for m in members if m.session is not None and m.error is None]
        if not ready:
            raise next(m.error for m in members if m.error is not None)
        lanes = []
        done = finished_runs(store, sweep_id)
        for name, names in recorded.items():
            mine = [c for c in cells if (c.host or "") == name]
            lane_members = [m for m in ready if m.name in names]
            if not lane_members or not mine:
                continue  # no host of this lane is back: its cells keep what they have (resume again with it)
            preflight = run_preflight(
                lane_members[0].session, mine,  # type: ignore[arg-type]
                our_pgids=our_pgids(store, sweep_id, lane_members[0].name),
            )  # fmt: skip
            lane = Lane(name, lane_key(preflight), lane_members, preflight.plans)
            for plan in preflight.invalid:
                if plan.cell.cell_id not in done:
                    record_invalid(store, sweep_id, lane_members[0].name, plan)
            lane.queue.extend(jobs_left(store, sweep_id, preflight, options.retries))
            lanes.append(lane)
            hooks.on_plan(preflight)
        _run_and_finish(store, sweep_id, matrix, lanes, options, hooks)
        return sweep_id
    finally:
        _leave(members)


def _rejoin(store: Store, member: Member, sweep_id: str, options: SweepOptions, hooks: SweepHooks) -> None:
    """Connect, take the lock again, and settle this host's runs that were in flight (re-attach or abandon)."""
    try:
        member.session = HostSession.open(member.config, member.breaker)
        member.lock = HostLock(member.session.transport, member.session.workdir, sweep_id)
        member.lock.acquire()
        settle_in_flight(
            store, member.session, member.open_session, sweep_id, options.settings, hooks.on_reattach,
            hooks.on_event, host=member.name,
        )  # fmt: skip
        reap_orphans(store, member.session, sweep_id, options.settings.deadlines.stop_grace, host=member.name)
    except OrchestratorError as exc:
        member.error = exc
        hooks.on_host(member.name, f"host {member.name} left out of the resumed pool: {exc}")


def _run_and_finish(
    store: Store, sweep_id: str, matrix: Matrix, lanes: list[Lane], options: SweepOptions, hooks: SweepHooks
) -> None:
    _run_lanes(store, sweep_id, matrix, lanes, options, hooks)
    ready = [m for lane in lanes for m in lane.members]
    for member in ready:
        _reap(store, member, sweep_id, options)
    stopped = any(m.stopped for m in ready)
    # Only across the whole sweep does an answer that reads well show as wrong: it disagrees with the rest.
    review_answers(store, sweep_id, options.settings.probes)
    store.finish_sweep(sweep_id, "interrupted" if stopped else "done", time.time())


def _leave(members: list[Member]) -> None:
    """Give every lock back (a host that is down keeps its lock for the resume) and close the connections."""
    for member in members:
        if member.lock is not None:
            _quietly(lambda m=member: release_lock(m.lock, m.breaker))  # type: ignore[misc]
        if member.session is not None:
            member.session.close()


def _join(member: Member, cells: list[Cell], sweep_id: str) -> None:
    """Connect, take the host's lock, and preflight; a host that fails any of it stays out of the pool."""
    try:
        member.session = HostSession.open(member.config, member.breaker)
        member.lock = HostLock(member.session.transport, member.session.workdir, sweep_id)
        member.lock.acquire()
        member.preflight = run_preflight(member.session, cells)
    except OrchestratorError as exc:
        member.error = exc
        if member.lock is not None:
            _quietly(member.lock.release)
            member.lock = None


def _record(
    sweep_id: str, matrix: Matrix, members: list[Member], lanes: list[Lane], options: SweepOptions, cells: int
) -> SweepRecord:
    first = lanes[0].members[0]
    assert first.preflight is not None
    settings = sweep_settings(matrix, first.config, options, first.config.scenario) | {
        "matrix_cells": cells,
        "pool": [m.config.to_dict() for m in members],
        "lanes": {lane.name: [m.name for m in lane.members] for lane in lanes},
    }
    facts = dict(first.preflight.host_facts) | {
        "pool": {m.name: m.preflight.host_facts | {"sglang": m.preflight.versions.get("sglang")}
                 for m in members if m.preflight is not None},
    }  # fmt: skip
    return SweepRecord(
        sweep_id=sweep_id, name=matrix.name, host=",".join(m.name for m in members), matrix_yaml=matrix.text,
        matrix_path=matrix.path, started_at=time.time(), host_facts=facts, versions=first.preflight.versions,
        settings=settings,
    )  # fmt: skip


def _run_lanes(
    store: Store, sweep_id: str, matrix: Matrix, lanes: list[Lane], options: SweepOptions, hooks: SweepHooks
) -> None:
    """One scheduler per host, the hosts of a lane sharing its queue; then what no host could run is recorded."""
    watches: dict[str, HostWatch] = {}

    def run(member: Member, lane: Lane) -> None:
        assert member.session is not None
        watch = host_watch(member.session, member.breaker, options, hooks, pooled=True)
        watches[member.name] = watch
        scheduler = Scheduler(
            store, member.open_session, member.session, sweep_id, options.settings, options.retries,
            packed=options.packed, matrix=matrix, on_event=hooks.on_event, on_result=hooks.on_result,
            stop_on_infra=options.on_infra == "stop", watch=watch, shared=True,
        )  # fmt: skip
        scheduler.run(lane.queue)
        member.stopped = scheduler.stopped is not None

    pairs = [(m, lane) for lane in lanes for m in lane.members]
    for _ in range(MAX_ROUNDS):
        _each(pairs, lambda pair: run(*pair), reraise=True)
        # A host that ended while another still ran may have missed a retry that one queued later, before it
        # went down: the hosts still up take another turn at what is left.
        pairs = [(m, lane) for m, lane in pairs if lane.queue and m.breaker.tripped is None and not m.stopped]
        if not pairs:
            break
    for lane in lanes:
        down = [m for m in lane.members if m.breaker.tripped is not None]
        while lane.queue:
            job = lane.queue.popleft()
            host = lane.members[0].name
            if len(down) == len(lane.members):
                verdict = watches[down[0].name].down_verdict()
                host = down[0].name
            else:
                verdict = gpus_unavailable_verdict(
                    f"not launched: needs {job.plan.cell.tp_size} GPUs, and no host of the pool has that many usable"
                )
            run_id = record_unlaunched(store, sweep_id, host, job.plan.cell, verdict)
            if hooks.on_result is not None:
                hooks.on_result(AttemptResult(job.plan.cell, run_id, verdict, Slot((), 0), True))


def _reap(store: Store, member: Member, sweep_id: str, options: SweepOptions) -> None:
    """End this host's launches whose stop failed; a host that is down keeps them for `--resume`."""
    assert member.session is not None
    try:
        reap_orphans(store, member.session, sweep_id, options.settings.deadlines.stop_grace, host=member.name)
    except TransportError:
        if member.breaker.tripped is None:
            raise


def _each(items: Sequence[T], work: Callable[[T], None], *, reraise: bool = False) -> None:
    """`work` on every item at once, one thread each; with `reraise`, the first exception is raised after all end."""
    errors: list[BaseException] = []

    def guarded(item: T) -> None:
        try:
            work(item)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(item,), name="pool-host") for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors and (reraise or not isinstance(errors[0], OrchestratorError)):
        raise errors[0]


def _quietly(work: Callable[[], object]) -> None:
    with contextlib.suppress(OrchestratorError):
        work()
