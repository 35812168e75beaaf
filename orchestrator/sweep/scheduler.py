"""Running cells: packed onto disjoint GPU sets when they fit, retried when they fail.

One loop serves both modes: `--serial` is packing with room for one launch. Cells start in
matrix order, first fit; a cell that needs more GPUs than are free waits for a running one to end.
Each worker thread has its own host session (its own SSH connection), so a slow probe of one
launch never delays the health polls of another.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from orchestrator.config.model import Matrix
from orchestrator.host.facts import GpuHolder
from orchestrator.host.session import HostSession
from orchestrator.model import Category, Cell, Phase, Status, Verdict
from orchestrator.store.records import RunRecord, new_run_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult, Slot, run_attempt
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.plan import CellPlan, GpuPool
from orchestrator.sweep.preflight import describe_holders

EventSink = Callable[[Cell, str, Phase | None], None]


@dataclass
class Job:
    """A cell still owed attempts."""

    plan: CellPlan
    attempt: int


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
    ):
        self.store = store
        self.open_session = open_session
        self.main = main
        self.sweep_id = sweep_id
        self.settings = settings
        self.retries = retries
        self.packed = packed
        self.matrix = matrix
        self.on_event = on_event
        self.on_result = on_result
        self.pool = GpuPool(main.config.gpus)
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

    def run(self, jobs: list[Job]) -> None:
        """Run every job (and the retries they earn) to a verdict."""
        pending = deque(jobs)
        width = self.main.config.gpus if self.packed else 1
        in_flight: dict[Future[AttemptResult], Job] = {}
        ports: dict[Future[AttemptResult], int] = {}
        try:
            with ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="cell") as executor:
                while pending or in_flight:
                    self._start_fitting(pending, in_flight, ports, executor, width)
                    if not in_flight:
                        self._refuse_unrunnable(pending)
                        continue
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in done:
                        job = in_flight.pop(future)
                        ports.pop(future, None)
                        self._finished(job, future.result(), pending)
        finally:
            for session in self._sessions:
                session.close()

    def _start_fitting(
        self,
        pending: deque[Job],
        in_flight: dict[Future[AttemptResult], Job],
        ports: dict[Future[AttemptResult], int],
        executor: ThreadPoolExecutor,
        width: int,
    ) -> None:
        for job in list(pending):
            if len(in_flight) >= width:
                return
            gpus = self.pool.take(job.plan.cell.tp_size)
            if gpus is None:
                continue
            foreign = [h for h in self.main.gpu_holders(self._our_pgids()) if h.gpu_index in gpus and not h.ours]
            if foreign:
                self._refuse_foreign(job, gpus, foreign)
                pending.remove(job)
                continue
            port = self.main.free_port(set(ports.values()))
            pending.remove(job)
            future = executor.submit(self._attempt, job, Slot(gpus, port))
            in_flight[future] = job
            ports[future] = port

    def _our_pgids(self) -> set[int]:
        return {r.pgid for r in self.store.unfinished_runs(self.sweep_id) if r.pgid is not None}

    def _attempt(self, job: Job, slot: Slot) -> AttemptResult:
        return run_attempt(
            self.store,
            self._session(),
            self.sweep_id,
            job.plan,
            slot,
            job.attempt,
            self.settings,
            self.matrix,
            self.on_event,
        )

    def _finished(self, job: Job, result: AttemptResult, pending: deque[Job]) -> None:
        if result.gpus_released:
            self.pool.give_back(result.slot.gpus)
        if self.on_result:
            self.on_result(result)
        if result.verdict.status in (Status.FAIL, Status.INFRA) and job.attempt <= self.retries:
            pending.appendleft(Job(job.plan, job.attempt + 1))

    def _refuse_foreign(self, job: Job, gpus: tuple[int, ...], holders: list[GpuHolder]) -> None:
        """A foreign process took GPUs mid-sweep: record the cell with the holders, never kill them."""
        self.pool.mark_unavailable(h.gpu_index for h in holders)
        self.pool.give_back(g for g in gpus if g not in {h.gpu_index for h in holders})
        verdict = Verdict(
            Status.INFRA,
            Phase.PREFLIGHT,
            Category.GPU_MEMORY_IN_USE,
            None,
            reason=f"not launched: GPUs held by processes that are not ours ({describe_holders(holders)})",
        )
        self._record_unlaunched(job, verdict)

    def _refuse_unrunnable(self, pending: deque[Job]) -> None:
        """Nothing runs and nothing fits: the GPUs left cannot hold the waiting cells."""
        while pending:
            job = pending.popleft()
            verdict = Verdict(
                Status.INFRA,
                Phase.PREFLIGHT,
                Category.GPU_MEMORY_IN_USE,
                None,
                reason=f"not launched: needs {job.plan.cell.tp_size} GPUs, only {list(self.pool.free)} are usable",
            )
            self._record_unlaunched(job, verdict)

    def _record_unlaunched(self, job: Job, verdict: Verdict) -> None:
        run_id = new_run_id()
        self.store.create_run(
            RunRecord(
                run_id=run_id,
                sweep_id=self.sweep_id,
                cell_id=job.plan.cell.cell_id,
                attempt=job.attempt,
                host=self.main.config.name,
                started_at=time.time(),
                install=job.plan.cell.install,
            )
        )
        self.store.finish_run(run_id, outcome=None, evidence=None, verdict=verdict, timings={}, ended_at=time.time())
        if self.on_result:
            self.on_result(AttemptResult(job.plan.cell, run_id, verdict, Slot((), 0), True))
