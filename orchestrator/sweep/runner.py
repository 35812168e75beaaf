"""A sweep from start to end: lock, preflight, store, run every cell, and resume after any interruption.

`start_sweep` and `resume_sweep` share everything after their first steps: the cells of the sweep
are in the store, every run row is written before its launch, and the host's run directories say
which launches exist. Resuming re-attaches to launches still alive, marks dead in-flight ones
abandoned (their cell runs again), ends any group of ours that outlived its run, and never
relaunches a cell that already has its verdict (recover.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.config.model import HostConfig, Matrix, OnInfra
from orchestrator.errors import TransportError
from orchestrator.host.lock import HostLock
from orchestrator.host.session import HostSession
from orchestrator.matrix.cost import Strategy
from orchestrator.matrix.expand import expand
from orchestrator.model import Cell, Phase
from orchestrator.store.records import RunRecord, SweepRecord, new_sweep_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.hostdown import Announce, HostWatch
from orchestrator.sweep.preflight import Preflight, run_preflight
from orchestrator.sweep.recover import (
    finished_runs,
    jobs_left,
    our_pgids,
    reap_orphans,
    record_invalid,
    settle_in_flight,
)
from orchestrator.sweep.scheduler import Job, Scheduler
from orchestrator.sweep.strategy import starting_cells
from orchestrator.transport import HostBreaker

EventSink = Callable[[Cell, str, Phase | None], None]


@dataclass
class SweepHooks:
    """How a sweep reports progress (the CLI's live display plugs in here)."""

    on_plan: Callable[[Preflight], None] = lambda _p: None
    on_event: EventSink | None = None
    on_result: Callable[[AttemptResult], None] | None = None
    on_reattach: Callable[[RunRecord, bool], None] = lambda _r, _alive: None
    on_host: Announce = lambda _host, _line: None
    """A host went down or came back: one line, said once (not per cell)."""


@dataclass
class SweepOptions:
    """Choices of one `orchestrator sweep` invocation."""

    packed: bool = True
    settings: RunSettings = field(default_factory=RunSettings)
    retries: int = 0
    on_infra: OnInfra = "continue"
    """After an infra verdict (host or orchestrator failed): go on, or stop and skip the cells left."""
    strategy: Strategy = "full"
    """`full`: every cell; `pairwise`: a strength-2 covering subset of the valid cells (the rest not run)."""
    wait_for_host_s: float = 0.0
    """How long to wait for a host that went down before its remaining cells are infra (0: not at all)."""


def sweep_settings(matrix: Matrix, host: HostConfig, options: SweepOptions, scenario: str | None) -> dict[str, Any]:
    """What a sweep stores to be resumed with the same behaviour."""
    return {
        "deadlines": options.settings.deadlines.to_dict(),
        "probes": options.settings.probes.to_dict(),
        "retries": options.retries,
        "packed": options.packed,
        "on_infra": options.on_infra,
        "host": host.to_dict(),
        "scenario": scenario,
        "strategy": options.strategy,
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
    breaker = HostBreaker(host.name)
    session = HostSession.open(host, breaker)
    try:
        sweep_id = new_sweep_id()
        lock = HostLock(session.transport, session.workdir, sweep_id)
        # Before preflight: a second sweep is refused naming the first, not for the GPUs the first one holds.
        lock.acquire()
        try:
            preflight = run_preflight(session, cells)
            settings = sweep_settings(matrix, host, options, host.scenario) | {"matrix_cells": len(cells)}
            cells, preflight = _chosen(cells, preflight, options.strategy)
            hooks.on_plan(preflight)
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
                    settings=settings,
                )
            )
            store.save_cells(sweep_id, cells)
            for plan in preflight.invalid:
                record_invalid(store, sweep_id, host.name, plan)
            jobs = [Job(p, 1) for p in preflight.valid]
            stopped = _run_jobs(store, session, host, sweep_id, matrix, options, hooks, jobs, breaker)
            _finish(store, session, sweep_id, options, stopped, breaker)
        finally:
            release_lock(lock, breaker)
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
    breaker = HostBreaker(host.name)
    session = HostSession.open(host, breaker)
    try:
        lock = HostLock(session.transport, session.workdir, sweep_id)
        lock.acquire()
        try:
            store.reopen_sweep(sweep_id)
            settle_in_flight(
                store, session, lambda: HostSession.open(host), sweep_id, options.settings, hooks.on_reattach,
                hooks.on_event,
            )  # fmt: skip
            # Before preflight, whose check for foreign GPU holders would take these for strangers'.
            reap_orphans(store, session, sweep_id, options.settings.deadlines.stop_grace)
            preflight = run_preflight(session, cells, our_pgids=our_pgids(store, sweep_id))
            hooks.on_plan(preflight)
            # Killed before they were recorded: preflight rejects them again, now with a record.
            done = finished_runs(store, sweep_id)
            for plan in preflight.invalid:
                if plan.cell.cell_id not in done:
                    record_invalid(store, sweep_id, host.name, plan)
            jobs = jobs_left(store, sweep_id, preflight, options.retries)
            stopped = _run_jobs(store, session, host, sweep_id, matrix, options, hooks, jobs, breaker)
            _finish(store, session, sweep_id, options, stopped, breaker)
        finally:
            release_lock(lock, breaker)
        return sweep_id
    finally:
        session.close()


def _chosen(cells: list[Cell], preflight: Preflight, strategy: Strategy) -> tuple[list[Cell], Preflight]:
    """The cells the strategy runs (every one rejected by preflight is kept: it costs nothing), in matrix order."""
    keep = {c.cell_id for c in starting_cells(strategy, [p.cell for p in preflight.valid])}
    keep |= {p.cell.cell_id for p in preflight.invalid}
    plans = [p for p in preflight.plans if p.cell.cell_id in keep]
    return [c for c in cells if c.cell_id in keep], replace(preflight, plans=plans)


def _run_jobs(
    store: Store,
    session: HostSession,
    host: HostConfig,
    sweep_id: str,
    matrix: Matrix,
    options: SweepOptions,
    hooks: SweepHooks,
    jobs: list[Job],
    breaker: HostBreaker,
) -> bool:
    """Run the jobs to their verdicts; True when an infra verdict stopped the sweep (on_infra: stop)."""
    scheduler = Scheduler(
        store,
        lambda: HostSession.open(host, breaker),
        session,
        sweep_id,
        options.settings,
        options.retries,
        packed=options.packed,
        matrix=matrix,
        on_event=hooks.on_event,
        on_result=hooks.on_result,
        stop_on_infra=options.on_infra == "stop",
        watch=host_watch(session, breaker, options, hooks),
    )
    scheduler.run(jobs)
    return scheduler.stopped is not None


def host_watch(
    session: HostSession, breaker: HostBreaker, options: SweepOptions, hooks: SweepHooks, *, pooled: bool = False
) -> HostWatch:
    """The scheduler's view of whether `session`'s host is up (checked again with a `true` on the host)."""
    return HostWatch(
        session.config.name, breaker, wait_s=options.wait_for_host_s,
        check=lambda: session.transport.run("true", timeout=10.0), announce=hooks.on_host, pooled=pooled,
    )  # fmt: skip


def release_lock(lock: HostLock, breaker: HostBreaker) -> None:
    """Give the host lock back; a host that is down keeps it until the sweep is resumed (the lock is the sweep's)."""
    try:
        lock.release()
    except TransportError:
        if breaker.tripped is None:
            raise


def _finish(
    store: Store, session: HostSession, sweep_id: str, options: SweepOptions, stopped: bool, breaker: HostBreaker
) -> None:
    # A launch whose stop failed (host unreachable at the time) must not outlive the sweep.
    try:
        reap_orphans(store, session, sweep_id, options.settings.deadlines.stop_grace)
    except TransportError:
        if breaker.tripped is None:
            raise  # the host is down: its launches are found by their run directories on `--resume`
    store.finish_sweep(sweep_id, "interrupted" if stopped else "done", time.time())
