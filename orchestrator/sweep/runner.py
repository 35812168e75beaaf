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
from functools import partial
from typing import Any

from orchestrator.config.model import HostConfig, Matrix, OnInfra
from orchestrator.errors import TransportError
from orchestrator.host.lock import HostLock
from orchestrator.host.session import HostSession
from orchestrator.matrix.cost import Estimate, Strategy, default_strategy
from orchestrator.matrix.expand import expand
from orchestrator.model import Cell, Phase
from orchestrator.store.records import RunRecord, SweepRecord, new_sweep_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.agreement import review_answers
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.costing import LaunchCost, launch_estimate
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.hostdown import Announce, HostWatch
from orchestrator.sweep.known_bad import Proof
from orchestrator.sweep.plan_steps import Launcher, adapt, adaptive_budget, proofs_for
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
from orchestrator.sweep.terminate import terminate_as_interrupt
from orchestrator.transport import HostBreaker

EventSink = Callable[[Cell, str, Phase | None], None]


@dataclass
class SweepHooks:
    """How a sweep reports progress (the CLI's live display plugs in here)."""

    on_plan: Callable[[Preflight], None] = lambda _p: None
    on_event: EventSink | None = None
    on_result: Callable[[AttemptResult], None] | None = None
    on_reattach: Callable[[RunRecord, bool], None] = lambda _r, _alive: None
    on_start: Callable[[str], None] = lambda _sweep_id: None
    """The sweep's record exists (new or reopened): its id can be printed, and a signal stops its runs."""
    on_cost: Callable[[LaunchCost], None] = lambda _c: None
    """The plan's cost, before anything is launched or stored; raising (CostRefused) cancels the sweep."""
    on_grow: Callable[[list[Cell], str], None] = lambda _cells, _why: None
    """The plan grew (localisation picked cells, or a fuller resume added the rest)."""
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
    strategy: Strategy | None = None
    """`full`: every cell; `pairwise`: a strength-2 covering subset of the valid cells (the rest not run);
    `adaptive`: that subset, then the cells that localise each failure. None: by the matrix's size when
    starting, the sweep's own when resuming."""
    budget: int | None = None
    """Adaptive: the most cells launched in all (None: strategy.default_budget)."""
    retry_known_bad: bool = False
    """Launch cells that past sweeps proved bad on this host, version and GPU (else they are skipped)."""
    wait_for_host_s: float = 0.0
    """How long to wait for a host that went down before its remaining cells are infra (0: not at all)."""
    max_queued: int | None = None
    """On a Slurm host: jobs submitted ahead at most (None: every cell at once; Slurm queues them)."""


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
        "retry_known_bad": options.retry_known_bad,
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
            strategy = options.strategy or default_strategy(len(cells))
            by_default, options = options.strategy is None, replace(options, strategy=strategy)
            proofs = proofs_for(store, host.name, preflight, options.retry_known_bad, sweep_id)
            chosen, start = _chosen(cells, preflight, strategy)
            budget = adaptive_budget(options.budget, len(cells), preflight, start) if strategy == "adaptive" else None
            estimate = launch_estimate_for(store, host, options, preflight, start, proofs, budget)
            hooks.on_cost(LaunchCost.of(len(cells), strategy, by_default, start, proofs, budget, estimate))
            settings = sweep_settings(matrix, host, options, host.scenario) | {"matrix_cells": len(cells)}
            if budget is not None:
                settings["budget"] = budget
            hooks.on_plan(start)
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
            store.save_cells(sweep_id, chosen, "matrix" if strategy == "full" else "covering")
            hooks.on_start(sweep_id)
            for plan in start.invalid:
                record_invalid(store, sweep_id, host.name, plan)
            run_jobs = partial(_run_jobs, store, session, host, sweep_id, matrix, options, hooks, breaker)
            run = Launcher(store, sweep_id, host.name, hooks.on_result, proofs, run_jobs)
            stopped = run([Job(p, 1) for p in start.valid])
            if strategy == "adaptive" and not stopped:
                stopped = adapt(store, sweep_id, matrix.retries, preflight, budget or 0, run, hooks.on_grow)
            _finish(store, session, sweep_id, options, stopped, breaker)
        finally:
            release_lock(lock, breaker)
        return sweep_id
    finally:
        session.close()


def resume_sweep(
    store: Store, sweep_ref: str, matrix: Matrix, host: HostConfig, options: SweepOptions, hooks: SweepHooks
) -> str:
    """Finish an interrupted sweep: re-attach or clean up what was in flight, run what is left.

    With a fuller strategy than the sweep's own (`--strategy full` on a pairwise or adaptive sweep),
    the matrix's cells it did not run are added and run too; an adaptive sweep goes on localising.
    """
    record = store.resolve_sweep(sweep_ref)
    sweep_id = record.sweep_id
    stored: Strategy = record.settings.get("strategy") or "full"
    strategy = options.strategy or stored
    options = replace(options, strategy=strategy)
    breaker = HostBreaker(host.name)
    session = HostSession.open(host, breaker)
    try:
        lock = HostLock(session.transport, session.workdir, sweep_id)
        lock.acquire()
        try:
            store.reopen_sweep(sweep_id)
            hooks.on_start(sweep_id)
            with terminate_as_interrupt(session.schedules_gpus):
                settle_in_flight(
                    store, session, lambda: HostSession.open(host), sweep_id, options.settings, hooks.on_reattach,
                    hooks.on_event,
                )  # fmt: skip
            # Before preflight, whose check for foreign GPU holders would take these for strangers'.
            reap_orphans(store, session, sweep_id, options.settings.deadlines.stop_grace)
            whole = expand(matrix) if strategy != "pairwise" else []
            cells = store.get_cells(sweep_id)
            mine = {c.cell_id for c in cells}
            fill = [c for c in whole if c.cell_id not in mine] if strategy == "full" and stored != "full" else []
            everything = cells + [c for c in whole if c.cell_id not in mine]
            full_preflight = run_preflight(session, everything, our_pgids=our_pgids(store, sweep_id))
            keep = mine | {c.cell_id for c in fill}
            preflight = replace(full_preflight, plans=[p for p in full_preflight.plans if p.cell.cell_id in keep])
            proofs = proofs_for(store, host.name, full_preflight, options.retry_known_bad, sweep_id)
            jobs = jobs_left(store, sweep_id, preflight, options.retries)
            budget = None
            if strategy == "adaptive":
                given = options.budget or record.settings.get("budget")
                budget = adaptive_budget(given, len(whole), full_preflight, preflight)
            # Asked before the plan grows in the store: a refused fill leaves the sweep as it was.
            owed = replace(preflight, plans=[j.plan for j in jobs])
            spent = _launched(store, sweep_id, full_preflight, proofs)
            room = None if budget is None else max(0, budget - spent) + len(owed.valid)
            estimate = launch_estimate_for(store, host, options, full_preflight, owed, proofs, room)
            size = int(record.settings.get("matrix_cells") or len(whole) or len(cells))
            try:
                hooks.on_cost(LaunchCost.of(size, strategy, False, owed, proofs, room, estimate))
            except BaseException:
                if record.status != "running":  # refused: the sweep stays as it was
                    store.finish_sweep(sweep_id, record.status, record.ended_at)
                raise
            added = store.add_cells(sweep_id, fill, "fill")
            hooks.on_grow(added, f"--strategy full: the cells the {stored} sweep did not run")
            if strategy != stored:
                store.update_sweep_settings(sweep_id, {"strategy": strategy})
            if budget is not None and budget != record.settings.get("budget"):
                store.update_sweep_settings(sweep_id, {"budget": budget})
            hooks.on_plan(preflight)
            # Killed before they were recorded: preflight rejects them again, now with a record.
            done = finished_runs(store, sweep_id)
            for plan in preflight.invalid:
                if plan.cell.cell_id not in done:
                    record_invalid(store, sweep_id, host.name, plan)
            run_jobs = partial(_run_jobs, store, session, host, sweep_id, matrix, options, hooks, breaker)
            run = Launcher(store, sweep_id, host.name, hooks.on_result, proofs, run_jobs)
            stopped = run(jobs)
            if budget is not None and not stopped:
                stopped = adapt(store, sweep_id, matrix.retries, full_preflight, budget, run, hooks.on_grow)
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


def _launched(store: Store, sweep_id: str, preflight: Preflight, proofs: dict[str, Proof]) -> int:
    """Cells of the sweep that cost a launch: valid ones, less the known-bad ones skipped."""
    valid = {p.cell.cell_id for p in preflight.valid}
    return len([c for c in store.get_cells(sweep_id) if c.cell_id in valid and c.cell_id not in proofs])


def launch_estimate_for(
    store: Store,
    host: HostConfig,
    options: SweepOptions,
    preflight: Preflight,
    start: Preflight,
    proofs: dict[str, Proof],
    budget: int | None,
) -> Estimate:
    """The wall time of what the sweep will launch: its first cells, or up to its budget when adaptive."""
    first = len([p for p in start.valid if p.cell.cell_id not in proofs])
    most = max(first, budget) if budget is not None else first
    sample = [p.cell for p in preflight.valid]
    history = store.host_history(host.name)
    return launch_estimate(most, host, options.settings.deadlines, history, sample, options.packed)


def _run_jobs(
    store: Store,
    session: HostSession,
    host: HostConfig,
    sweep_id: str,
    matrix: Matrix,
    options: SweepOptions,
    hooks: SweepHooks,
    breaker: HostBreaker,
    jobs: list[Job],
) -> bool:
    """Run the jobs to their verdicts; True when an infra verdict stopped the sweep (on_infra: stop).

    Bound to a sweep with `partial`, it is the one call the known-bad filter and localisation use.
    """
    scheduler = Scheduler(
        store,
        lambda: session.for_worker(breaker),
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
        max_queued=options.max_queued,
    )
    with terminate_as_interrupt(session.schedules_gpus):
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
    # Only across the whole sweep does an answer that reads well show as wrong: it disagrees with the rest.
    review_answers(store, sweep_id, options.settings.probes)
    store.finish_sweep(sweep_id, "interrupted" if stopped else "done", time.time())
