"""Running cells: packed onto disjoint GPU sets when they fit, retried when they fail.

One loop serves both modes: `--serial` is packing with room for one launch. Cells start in
matrix order, first fit; a cell that needs more GPUs than are free waits for a running one to end.
Each worker thread has its own host session (its placement's `worker_session`), so a slow probe of one
launch never delays the health polls of another.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from orchestrator.classify.unlaunched import gpus_unavailable_verdict, infra_verdict, skipped_verdict
from orchestrator.config.model import Matrix
from orchestrator.errors import TransportError
from orchestrator.host.facts import GpuHolder, NoGpuReading
from orchestrator.host.session import HostSession
from orchestrator.model import Cell, Phase, Status, Verdict
from orchestrator.planning.cells import CellPlan, GpuPool
from orchestrator.retries import decide_after, gpu_fault, port_race, retry_class
from orchestrator.settings import RetryPolicy
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult, Slot, record_unlaunched, run_attempt
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.hostdown import HostWatch
from orchestrator.sweep.preflight import describe_holders
from orchestrator.sweep.suspects import Suspects

EventSink = Callable[[Cell, str, Phase | None], None]
VERIFIED_FRESH_S = 0.5
"""GPUs nvidia-smi showed free this recently (the last step of the attempt that used them, or preflight)
are launched on without asking it again: it is slow to start, and nothing of ours runs there meanwhile."""


@dataclass
class Job:
    """A cell still owed attempts."""

    plan: CellPlan
    attempt: int
    history: tuple[Verdict, ...] = ()
    """The verdicts of its attempts so far, in order: what the next retry decision reads."""
    raced: frozenset[int] = frozenset()
    """Ports its earlier attempts lost to other processes: never handed to it again."""


class Scheduler:
    """Runs jobs on a host until each has a verdict (and its retries, if it failed)."""

    def __init__(
        self,
        store: Store,
        open_session: Callable[[], HostSession],
        main: HostSession,
        sweep_id: str,
        settings: RunSettings,
        retries: int,
        *,
        packed: bool,
        matrix: Matrix | None = None,
        on_event: EventSink | None = None,
        on_result: Callable[[AttemptResult], None] | None = None,
        stop_on_infra: bool = False,
        watch: HostWatch | None = None,
        shared: bool = False,
        max_queued: int | None = None,
        retry: RetryPolicy | None = None,
        suspects: Suspects | None = None,
    ):
        self.store = store
        self.open_session = open_session
        self.main = main
        self.sweep_id = sweep_id
        self.settings = settings
        self.retries = retries
        self.retry = retry or RetryPolicy()
        """Retries by failure class (retries.py); `retries` is the default of a class it leaves open."""
        self.saved = 0
        """Launches `retries` alone would have spent that the class policy did not (deterministic failures)."""
        self.suspects = suspects or Suspects([main.config.name])
        """Hosts whose failures do not follow the flags, shared by the schedulers of a pool."""
        self.packed = packed
        self.matrix = matrix
        self.on_event = on_event
        self.on_result = on_result
        self.stop_on_infra = stop_on_infra
        self.watch = watch
        """The host's breaker: once the host is down, its cells are infra at once (or wait, see hostdown.py)."""
        self.shared = shared
        """The job queue is shared with the schedulers of other hosts (a pool): a host that is down leaves
        its jobs to them instead of recording them infra."""
        self.max_queued = max_queued
        """A batch scheduler's host: jobs submitted ahead at most (None: every cell at once)."""
        self.stopped: AttemptResult | None = None
        """The infra result that stopped the sweep (stop_on_infra): nothing starts after it."""
        self.pool = GpuPool(main.config.gpus)
        self.foreign: dict[int, GpuHolder] = {}
        """GPU index -> the process not ours found holding it; such GPUs are never handed out again."""
        self._local = threading.local()
        self._sessions: list[HostSession] = []
        self._lock = threading.Lock()

    def _session(self) -> HostSession:
        session: HostSession | None = getattr(self._local, "session", None)
        if session is None:
            session = self.open_session()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def run(self, jobs: list[Job] | deque[Job]) -> None:
        """Run every job (and the retries they earn) to a verdict; a deque is used as is (a pool's shared queue)."""
        pending = jobs if isinstance(jobs, deque) else deque(jobs)
        width = self._width(len(pending))
        in_flight: dict[Future[AttemptResult], Job] = {}
        slots: dict[Future[AttemptResult], Slot] = {}
        try:
            with ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="cell") as executor:
                try:
                    while pending or in_flight:
                        if self.stopped is not None:
                            self._skip(pending, self.stopped)
                        elif self.watch is not None and not self.watch.up():
                            if not self.shared:
                                self._refuse_host_down(pending, self.watch)
                            elif not in_flight:
                                break  # the pool's other hosts run what is left
                        elif self.suspects.avoid(self.main.config.name):
                            if not in_flight:
                                break  # a suspect host: the other hosts of the pool run what is left
                        else:
                            self._start_fitting(pending, in_flight, slots, executor, width)
                        if not in_flight:
                            if self.shared:
                                if any(self._from_pool(j) <= len(self.pool.free) for j in list(pending)):
                                    continue  # lost a job to another host of the pool: try the next one
                                break  # what no host of the pool can run is refused by the pool, once every host ends
                            self._refuse_unrunnable(pending)
                            continue
                        done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                        for future in done:
                            self._finished(in_flight.pop(future), slots.pop(future), future.result(), pending)
                except BaseException:
                    # Before the pool waits for its workers: a batch job of ours must not run on unwatched.
                    self.main.placement.abandon()
                    raise
            if self.watch is not None:  # down on its last cell in flight: no round of starts asked `up()` since
                self.watch.say_down("nothing else was queued for it")
        finally:
            for session in self._sessions:
                session.close()

    def _width(self, jobs: int) -> int:
        """Launches in flight at once: the host's GPUs (packing), 1 (serial), or the jobs queued ahead on Slurm."""
        return self.main.placement.width(jobs, self.max_queued) if self.packed else 1

    def _start_fitting(
        self,
        pending: deque[Job],
        in_flight: dict[Future[AttemptResult], Job],
        slots: dict[Future[AttemptResult], Slot],
        executor: ThreadPoolExecutor,
        width: int,
    ) -> None:
        taking: set[int] = set()
        holders = _Holders(lambda: self.main.placement.holders(self._our_pgids(), set(self.pool.free) | taking))
        starts: list[tuple[Job, tuple[int, ...]]] = []
        try:
            for job in list(pending):
                if len(in_flight) + len(starts) >= width:
                    break
                gpus = self._take_unheld(self._from_pool(job), holders, taking)
                if gpus is None:
                    continue
                if not _claim(pending, job):  # another host of the pool took it first
                    self.pool.give_back(gpus)
                    continue
                starts.append((job, gpus))
            if not starts:
                return
            # One host command for all the ports of this round, spaced from each other and from those in use; a
            # relaunch after a port race never gets the port it lost (whoever took it may hold it still).
            avoid = {s.port for s in slots.values()}.union(*(job.raced for job, _ in starts))
            chosen = self.main.placement.free_ports(len(starts), avoid)
        except TransportError:
            self._put_back(pending, starts)
            if self.watch is None or self.watch.breaker.tripped is None:
                raise
            return  # the host went down: the next round sees it
        except NoGpuReading as exc:
            # Launching onto GPUs whose state nobody can read could put two servers on one GPU: stop here.
            self._put_back(pending, starts)
            verdict = infra_verdict(exc, Phase.PREFLIGHT)
            for job in _drain(pending):
                self._record_unlaunched(job, verdict)
            return
        for (job, gpus), port in zip(starts, chosen, strict=True):
            future = executor.submit(self._attempt, job, Slot(gpus, port))
            in_flight[future] = job
            slots[future] = Slot(gpus, port)

    def _from_pool(self, job: Job) -> int:
        """GPUs the job's launch takes from the pool: its tp size, or none where a batch scheduler hands them out."""
        return self.main.placement.gpus_from_pool(job.plan.cell.tp_size)

    def _put_back(self, pending: deque[Job], starts: list[tuple[Job, tuple[int, ...]]]) -> None:
        for job, gpus in reversed(starts):
            pending.appendleft(job)
            self.pool.give_back(gpus)

    def _refuse_host_down(self, pending: deque[Job], watch: HostWatch) -> None:
        """The host is down (and not waited for any longer): every cell still waiting is infra, at once."""
        for job in _drain(pending):
            self._record_unlaunched(job, watch.down_verdict())

    def _our_pgids(self) -> set[int]:
        host = self.main.config.name  # a pool's other hosts have process tables of their own
        return {r.pgid for r in self.store.unfinished_runs(self.sweep_id) if r.pgid is not None and r.host == host}

    def _attempt(self, job: Job, slot: Slot) -> AttemptResult:
        return run_attempt(
            self.store,
            self._session(),
            self.sweep_id,
            job.plan,
            slot,
            self.settings,
            self.matrix,
            self.on_event,
        )

    def _finished(self, job: Job, slot: Slot, result: AttemptResult, pending: deque[Job]) -> None:
        if result.gpus_released:  # those the pool gave (a batch job's result names the GPUs of its node)
            self.pool.give_back(slot.gpus)
        if self.on_result:
            self.on_result(result)
        fault = gpu_fault(result.verdict)
        host = self.main.config.name
        if fault is not None:
            self.suspects.mark(host, f"its GPUs report a hardware fault: {fault}")
        elif result.verdict.status is Status.PASS and job.attempt > 1:
            for other in self._failed_elsewhere(result):
                label = result.cell.label or result.cell.cell_id
                self.suspects.mark(other, f"{label} failed there and passes on {host}")
        history = (*job.history, result.verdict)
        decision = decide_after(history, self.retry, self.retries)
        self.saved += decision.saved
        if decision.again:
            raced = job.raced | {slot.port} if port_race(result.verdict) and slot.port else job.raced
            # Put back first in line; it starts once its GPUs are free again (a GPU-free check before any launch).
            pending.appendleft(Job(job.plan, job.attempt + 1, history, raced))
        elif result.verdict.status is Status.INFRA and self.stop_on_infra and self.stopped is None:
            self.stopped = result

    def _failed_elsewhere(self, result: AttemptResult) -> list[str]:
        """Hosts where this cell failed (not deterministically) before it passed here: their failures are theirs."""
        host = self.main.config.name
        return sorted({
            r.host for r in self.store.runs(self.sweep_id)
            if r.cell_id == result.cell.cell_id and r.host != host and r.verdict is not None
            and r.verdict.status is Status.FAIL and retry_class(r.verdict) != "deterministic"
        })  # fmt: skip

    def _skip(self, pending: deque[Job], cause: AttemptResult) -> None:
        """Record every cell still waiting as skipped, naming the infra failure that stopped the sweep."""
        reason = (
            f"not launched: the sweep stopped (on_infra: stop) after an infra failure of "
            f"{cause.cell.label or cause.cell.cell_id}: {cause.verdict.reason}"
        )
        for job in _drain(pending):
            self._record_unlaunched(job, skipped_verdict(reason))

    def _take_unheld(self, count: int, holders: _Holders, taking: set[int]) -> tuple[int, ...] | None:
        """Free GPUs that no foreign process holds; GPUs a foreign process took mid-sweep leave the pool."""
        while (gpus := self.pool.take(count)) is not None:
            taking.update(gpus)
            if self._seen_free(gpus):
                return gpus
            try:
                found = holders.on(gpus)
            except TransportError:
                self.pool.give_back(gpus)
                raise
            held = [h for h in found if not h.ours]
            if not held:
                return gpus
            # Never killed: the cells that cannot fit without these GPUs are reported with the holders.
            self.foreign.update((h.gpu_index, h) for h in held)
            self.pool.give_back(g for g in gpus if g not in self.foreign)
        return None

    def _seen_free(self, gpus: tuple[int, ...]) -> bool:
        """Whether nvidia-smi showed every one of `gpus` free within VERIFIED_FRESH_S, through any session."""
        now = time.monotonic()
        with self._lock:
            sessions = [self.main, *self._sessions]
        seen = [s.placement.free_seen for s in sessions]
        return all(now - max(free.get(g, float("-inf")) for free in seen) <= VERIFIED_FRESH_S for g in gpus)

    def _refuse_unrunnable(self, pending: deque[Job]) -> None:
        """Nothing runs and nothing fits: the GPUs left cannot hold the waiting cells."""
        held = [self.foreign[g] for g in sorted(self.foreign)]
        while pending:
            job = pending.popleft()
            verdict = gpus_unavailable_verdict(
                f"not launched: needs {job.plan.cell.tp_size} GPUs, only {list(self.pool.free)} are usable"
                + (f"; GPUs held by processes that are not ours: {describe_holders(held)}" if held else ""),
            )
            self._record_unlaunched(job, verdict)

    def _record_unlaunched(self, job: Job, verdict: Verdict) -> None:
        record_unlaunched(self.store, self.sweep_id, self.main.config.name, job.plan.cell, verdict, self.on_result)


def _claim(pending: deque[Job], job: Job) -> bool:
    """Take `job` out of the queue; False when another host's scheduler took it first (a pool shares it)."""
    try:
        pending.remove(job)
    except ValueError:
        return False
    return True


def _drain(pending: deque[Job]) -> Iterator[Job]:
    """Every job left in the queue, each taken out once even while other hosts' schedulers share it."""
    while True:
        try:
            yield pending.popleft()
        except IndexError:
            return


class _Holders:
    """What nvidia-smi shows, asked at most once per round of starts, and only when a GPU needs it."""

    def __init__(self, fetch: Callable[[], list[GpuHolder]]):
        self._fetch = fetch
        self._seen: list[GpuHolder] | None = None

    def on(self, gpus: tuple[int, ...]) -> list[GpuHolder]:
        """The processes holding any of `gpus`."""
        if self._seen is None:
            self._seen = self._fetch()
        return [h for h in self._seen if h.gpu_index in gpus]
