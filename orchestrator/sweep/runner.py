"""A sweep from start to end: preflight, lock, store, run every cell, and resume after any interruption.

`start_sweep` and `resume_sweep` share everything after their first steps: the cells of the sweep
are in the store, every run row is written before its launch, and the host's run directories say
which launches exist. Resuming re-attaches to launches still alive, marks dead in-flight ones
abandoned (their cell runs again) and never relaunches a cell that already has its verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config.model import HostConfig, Matrix
from orchestrator.host.launcher import Launch, LaunchSpec
from orchestrator.host.lock import HostLock
from orchestrator.host.session import HostSession
from orchestrator.matrix.expand import expand
from orchestrator.model import Cell, Phase, Status
from orchestrator.settings import ProbeSettings
from orchestrator.store.records import RunRecord, SweepRecord, new_run_id, new_sweep_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult, watch_attempt
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.plan import CellPlan
from orchestrator.sweep.preflight import Preflight, invalid_verdict, run_preflight
from orchestrator.sweep.scheduler import Job, Scheduler

EventSink = Callable[[Cell, str, Phase | None], None]


@dataclass
class SweepHooks:
    """How a sweep reports progress (the CLI's live display plugs in here)."""

    on_plan: Callable[[Preflight], None] = lambda _p: None
    on_event: EventSink | None = None
    on_result: Callable[[AttemptResult], None] | None = None
    on_reattach: Callable[[RunRecord, bool], None] = lambda _r, _alive: None


@dataclass
class SweepOptions:
    """Choices of one `orchestrator sweep` invocation."""

    packed: bool = True
    settings: RunSettings = field(default_factory=RunSettings)
    retries: int = 0


def sweep_settings(matrix: Matrix, host: HostConfig, options: SweepOptions, scenario: str | None) -> dict[str, Any]:
    """What a sweep stores to be resumed with the same behaviour."""
    return {
        "deadlines": options.settings.deadlines.to_dict(),
        "probes": options.settings.probes.to_dict(),
        "retries": options.retries,
        "packed": options.packed,
        "host": host.to_dict(),
        "scenario": scenario,
    }


def start_sweep(
    store: Store,
    matrix: Matrix,
    host: HostConfig,
    options: SweepOptions,
    hooks: SweepHooks,
) -> str:
    """Run a new sweep of `matrix` on `host`; returns its id."""
    cells = expand(matrix)
    session = HostSession.open(host)
    try:
        preflight = run_preflight(session, cells)
        hooks.on_plan(preflight)
        sweep_id = new_sweep_id()
        lock = HostLock(session.transport, session.workdir, sweep_id)
        lock.acquire()
        try:
            store.create_sweep(
                SweepRecord(
                    sweep_id=sweep_id,
                    name=matrix.name,
                    host=host.name,
                    matrix_yaml=matrix.text,
                    matrix_path=matrix.path,
                    started_at=time.time(),
                    host_facts=preflight.host_facts,
                    versions=preflight.versions,
                    settings=sweep_settings(matrix, host, options, host.scenario),
                )
            )
            store.save_cells(sweep_id, cells)
            for plan in preflight.invalid:
                _record_invalid(store, sweep_id, host.name, plan)
            _run_jobs(
                store, session, host, sweep_id, matrix, options, hooks, [Job(p, 1) for p in preflight.valid], lock
            )
            store.finish_sweep(sweep_id, "done", time.time())
        finally:
            lock.release()
        return sweep_id
    finally:
        session.close()


def resume_sweep(
    store: Store, sweep_ref: str, matrix: Matrix, host: HostConfig, options: SweepOptions, hooks: SweepHooks
) -> str:
    """Finish an interrupted sweep: re-attach or clean up what was in flight, run what is left."""
    record = store.resolve_sweep(sweep_ref)
    sweep_id = record.sweep_id
    cells = store.get_cells(sweep_id)
    session = HostSession.open(host)
    try:
        unfinished = store.unfinished_runs(sweep_id)
        lock = HostLock(session.transport, session.workdir, sweep_id)
        lock.acquire()
        try:
            store.reopen_sweep(sweep_id)
            _settle_in_flight(store, session, unfinished, options, hooks)
            preflight = run_preflight(session, cells)
            hooks.on_plan(preflight)
            jobs = _jobs_left(store, sweep_id, preflight, options.retries)
            _run_jobs(store, session, host, sweep_id, matrix, options, hooks, jobs, lock)
            store.finish_sweep(sweep_id, "done", time.time())
        finally:
            lock.release()
        return sweep_id
    finally:
        session.close()


def _run_jobs(
    store: Store,
    session: HostSession,
    host: HostConfig,
    sweep_id: str,
    matrix: Matrix,
    options: SweepOptions,
    hooks: SweepHooks,
    jobs: list[Job],
    lock: HostLock,
) -> None:
    def on_result(result: AttemptResult) -> None:
        lock.heartbeat()
        if hooks.on_result:
            hooks.on_result(result)

    scheduler = Scheduler(
        store,
        lambda: HostSession.open(host),
        session,
        sweep_id,
        options.settings,
        options.retries,
        packed=options.packed,
        matrix=matrix,
        on_event=hooks.on_event,
        on_result=on_result,
    )
    scheduler.run(jobs)


def _record_invalid(store: Store, sweep_id: str, host: str, plan: CellPlan) -> None:
    run_id = new_run_id()
    now = time.time()
    store.create_run(
        RunRecord(
            run_id=run_id,
            sweep_id=sweep_id,
            cell_id=plan.cell.cell_id,
            attempt=1,
            host=host,
            started_at=now,
            install=plan.cell.install,
        )
    )
    store.finish_run(run_id, outcome=None, evidence=None, verdict=invalid_verdict(plan), timings={}, ended_at=now)


def _settle_in_flight(
    store: Store, session: HostSession, unfinished: list[RunRecord], options: SweepOptions, hooks: SweepHooks
) -> None:
    """Re-attach to launches still alive; abandon (and clean up) the ones that died or never started."""
    cells = {c.cell_id: c for c in store.get_cells(unfinished[0].sweep_id)} if unfinished else {}
    for run in unfinished:
        launch = _recover(session, run)
        alive = launch is not None and session.launcher.alive(launch)
        hooks.on_reattach(run, alive)
        if launch is not None and alive and run.cell_id in cells:
            if run.state == "pending":
                store.mark_launched(
                    run.run_id,
                    run_dir=launch.spec.run_dir,
                    pgid=launch.pgid,
                    port=launch.spec.port,
                    gpus=launch.spec.gpus,
                )
            watch_attempt(store, session, cells[run.cell_id], run.run_id, launch, options.settings, hooks.on_event)
            continue
        if launch is not None:
            session.launcher.stop(launch, options.settings.deadlines.stop_grace)
        store.discard_run(run.run_id, time.time())


def _recover(session: HostSession, run: RunRecord) -> Launch | None:
    if not run.run_dir:
        return None
    spec = LaunchSpec(
        run_id=run.run_id,
        argv=(),
        env={},
        secret_names=(),
        gpus=tuple(run.gpus),
        port=run.port or 0,
        run_dir=run.run_dir,
        install=run.install,
    )
    return session.launcher.recover(spec)


def _jobs_left(store: Store, sweep_id: str, preflight: Preflight, retries: int) -> list[Job]:
    """Cells that still owe an attempt: no finished run yet, or failed with retries left."""
    runs = [r for r in store.runs(sweep_id) if r.state == "done"]
    by_cell: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_cell.setdefault(run.cell_id, []).append(run)
    jobs = []
    for plan in preflight.valid:
        done = sorted(by_cell.get(plan.cell.cell_id, []), key=lambda r: r.attempt)
        if not done:
            jobs.append(Job(plan, 1))
            continue
        last = done[-1].verdict
        if last is not None and last.status in (Status.FAIL, Status.INFRA) and len(done) <= retries:
            jobs.append(Job(plan, len(done) + 1))
    return jobs


def probe_settings_from(stored: dict[str, Any]) -> ProbeSettings:
    """Rebuild the probe settings a sweep stored."""
    return ProbeSettings.from_dict(stored)
