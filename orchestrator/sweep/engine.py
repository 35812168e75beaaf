"""The one sweep engine: `sweep`, `sweep --resume` and `run` differ only in where their cells come from.

A sweep holds each of its hosts (connection, lock, preflight; a single host is a pool of one), plans
through the strategy (full, pairwise, adaptive), leaves out the cells past sweeps proved bad, asks the
cost question, opens its record, runs the lanes, localises failures (adaptive), reaps what a failed
stop left behind, and finishes. A resume first settles what was in flight on each host (re-attach or
abandon) and goes on from the store. SIGINT/SIGTERM stop exactly this sweep's servers, each on the host
that launched it (sweep/interrupt.py), and unwind as SweepInterrupted for the caller to report.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from orchestrator.config.model import HostConfig, Matrix
from orchestrator.errors import OrchestratorError
from orchestrator.host.session import HostSession
from orchestrator.matrix.cost import Strategy, default_strategy
from orchestrator.matrix.expand import expand
from orchestrator.model import Cell
from orchestrator.planning.known_bad import Proof
from orchestrator.planning.strategy import LaunchCost, starting_cells
from orchestrator.store.records import SweepRecord, new_sweep_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.connect import open_host
from orchestrator.sweep.costing import plan_estimate
from orchestrator.sweep.interrupt import Interrupts, SweepInterrupted
from orchestrator.sweep.lanes import Lane, Member, each, join_hosts, laned
from orchestrator.sweep.options import SweepHooks, SweepOptions, SweepOutcome, check_launch_secrets, sweep_settings
from orchestrator.sweep.plan_steps import adaptive_budget, proofs_for
from orchestrator.sweep.preflight import Preflight, run_preflight
from orchestrator.sweep.recover import finished_runs, jobs_left, our_pgids, record_invalid
from orchestrator.sweep.scheduler import EventSink
from orchestrator.sweep.stages import finish, refuse_changed_install, rejoin, run
from orchestrator.transport import HostBreaker


def run_sweep(
    store: Store,
    matrix: Matrix,
    hosts: Sequence[HostConfig],
    options: SweepOptions,
    hooks: SweepHooks,
    *,
    resume: str | None = None,
) -> SweepOutcome:
    """Run a new sweep of `matrix` on `hosts` (or finish the sweep `resume`); raises SweepInterrupted on a signal."""
    by_name = {h.name: h for h in hosts}

    def open_session(name: str) -> HostSession:
        if name not in by_name:
            raise OrchestratorError(f"host {name} is not among this command's hosts ({', '.join(by_name)})")
        return open_host(by_name[name])

    deadlines = options.settings.deadlines
    interrupts = Interrupts(open_session, store, deadlines.stop_grace, deadlines.gpu_release, hooks.on_signal)
    started = hooks.on_start

    def on_start(sweep_id: str) -> None:
        interrupts.started(sweep_id)
        started(sweep_id)

    hooks = replace(hooks, on_start=on_start)
    with interrupts.installed():
        try:
            if resume is not None:
                return _resume(store, resume, matrix, hosts, options, hooks)
            return _start(store, matrix, hosts, options, hooks)
        except SweepInterrupted as exc:
            interrupts.settle(exc)
            raise


def _start(
    store: Store, matrix: Matrix, hosts: Sequence[HostConfig], options: SweepOptions, hooks: SweepHooks
) -> SweepOutcome:
    cells = expand(matrix)
    check_launch_secrets(hosts, matrix, cells, os.environ)  # seconds, before any host is asked anything
    sweep_id = new_sweep_id()
    members = [Member(h, HostBreaker(h.name)) for h in hosts]
    try:
        lanes = join_hosts(members, cells, sweep_id, hooks.on_host)
        strategy = options.strategy or default_strategy(len(cells))
        by_default, options = options.strategy is None, replace(options, strategy=strategy)
        first = lanes[0].first.preflight
        assert first is not None
        keep = {c.cell_id for c in starting_cells(strategy, [p.cell for p in first.valid])}
        starts: dict[str, Preflight] = {}
        proofs: dict[str, dict[str, Proof]] = {}
        for lane in lanes:
            own = lane.first.preflight
            assert own is not None
            plans = [replace(p, cell=laned(p.cell, lane.name)) for p in own.plans]
            lane.preflight = replace(own, plans=plans)
            chosen = [p for base, p in zip(own.plans, plans, strict=True) if base.cell.cell_id in keep or not p.ok]
            starts[lane.name] = replace(own, plans=chosen)
            proofs[lane.name] = proofs_for(store, lane.first.name, lane.preflight, options.retry_known_bad, sweep_id)
        lane0 = lanes[0].preflight
        assert lane0 is not None
        budget = None
        if strategy == "adaptive":
            budget = adaptive_budget(options.budget, len(cells), lane0, starts[lanes[0].name])
        start = _joined([starts[lane.name] for lane in lanes])  # shown and stored: the first lane's facts
        every = sum(len(lane.preflight.plans) for lane in lanes if lane.preflight is not None)
        all_proofs = {k: v for by_lane in proofs.values() for k, v in by_lane.items()}
        room = None if budget is None else budget * len(lanes)
        hooks.on_cost(_cost(store, lanes, options, (every, strategy, by_default), start, all_proofs, room))
        settings = sweep_settings(matrix, lanes[0].first.config, options, lanes[0].first.config.scenario)
        settings["matrix_cells"] = every
        if budget is not None:
            settings["budget"] = budget
        hooks.on_plan(start)
        store.create_sweep(_record(sweep_id, matrix, members, lanes, settings))
        store.save_cells(sweep_id, [p.cell for p in start.plans], "matrix" if strategy == "full" else "covering")
        hooks.on_start(sweep_id)
        for lane in lanes:
            for plan in starts[lane.name].invalid:
                record_invalid(store, sweep_id, lane.first.name, plan)
        stopped, saved = run(store, sweep_id, matrix, options, hooks, lanes, proofs, starts, budget)
        return finish(store, sweep_id, options, members, stopped, saved)
    finally:
        for member in members:
            member.leave()


def _resume(
    store: Store, ref: str, matrix: Matrix, hosts: Sequence[HostConfig], options: SweepOptions, hooks: SweepHooks
) -> SweepOutcome:
    """Finish an interrupted sweep: each host settles the runs that were on it, then what is left runs.

    With a fuller strategy than the sweep's own (`--strategy full` on a pairwise or adaptive sweep),
    the matrix's cells it did not run are added and run too; an adaptive sweep goes on localising.
    """
    record = store.resolve_sweep(ref)
    sweep_id = record.sweep_id
    stored: Strategy = record.settings.get("strategy") or "full"
    strategy = options.strategy or stored
    options = replace(options, strategy=strategy)
    cells = store.get_cells(sweep_id)
    # Every secret the launches and the re-attached servers need, before any run is touched.
    check_launch_secrets(hosts, matrix, cells, os.environ)
    if matrix.text != record.matrix_yaml:
        hooks.on_host("", (
            f"note: {matrix.path} changed since sweep {sweep_id} started; its cells stay the ones it stored "
            "(the file's deadlines, probes, retries and environment apply from now on)"
        ))  # fmt: skip
    recorded: dict[str, list[str]] = record.settings.get("lanes") or {"": [h.name for h in hosts]}
    members = [Member(h, HostBreaker(h.name)) for h in hosts]
    try:
        store.reopen_sweep(sweep_id)
        hooks.on_start(sweep_id)
        each(members, lambda m: rejoin(store, m, sweep_id, matrix, options, hooks))
        ready = [m for m in members if m.session is not None and m.error is None]
        if not ready:
            raise next(m.error for m in members if m.error is not None)
        done = finished_runs(store, sweep_id)
        lanes: list[Lane] = []
        starts: dict[str, Preflight] = {}
        proofs: dict[str, dict[str, Proof]] = {}
        owed_all: list[Preflight] = []
        fills: dict[str, list[Cell]] = {}
        budget: int | None = None
        spent = 0
        whole_size = 0
        for name, names in recorded.items():
            mine = [c for c in cells if (c.host or "") == name]
            lane_members = [m for m in ready if m.name in names or (len(recorded) == 1 and name == "")]
            if not lane_members or not mine:
                continue  # no host of this lane is back: its cells keep what they have (resume again with it)
            first = lane_members[0]
            assert first.session is not None
            whole = [laned(c, name) for c in expand(matrix)] if strategy != "pairwise" else []
            whole_size = max(whole_size, len(whole))
            ids = {c.cell_id for c in mine}
            fill = [c for c in whole if c.cell_id not in ids] if strategy == "full" and stored != "full" else []
            everything = mine + [c for c in whole if c.cell_id not in ids]
            full = run_preflight(first.session, everything, our_pgids=our_pgids(store, sweep_id, first.name))
            keep = ids | {c.cell_id for c in fill}
            if len(recorded) == 1:
                refuse_changed_install(record, first.name, full)
            lane = Lane(name, ("", "", ""), lane_members, preflight=full)
            preflight = replace(full, plans=[p for p in full.plans if p.cell.cell_id in keep])
            proofs[name] = proofs_for(store, first.name, full, options.retry_known_bad, sweep_id)
            jobs = jobs_left(store, sweep_id, preflight, options.retries, options.retry)
            starts[name] = replace(preflight, plans=[j.plan for j in jobs] + preflight.invalid)
            owed_all.append(replace(preflight, plans=[j.plan for j in jobs]))
            fills[name] = fill
            spent += _launched(store, sweep_id, full, proofs[name])
            if strategy == "adaptive" and budget is None:
                given = options.budget or record.settings.get("budget")
                budget = adaptive_budget(given, len(whole) or len(mine), full, preflight)
            for plan in preflight.invalid:
                if plan.cell.cell_id not in done:
                    record_invalid(store, sweep_id, first.name, plan)
            lanes.append(lane)
        if not lanes:
            raise OrchestratorError(
                f"no host of sweep {sweep_id} is back ({', '.join(m.name for m in members)}): nothing can go on"
            )
        owed = _joined(owed_all)
        all_proofs = {k: v for by_lane in proofs.values() for k, v in by_lane.items()}
        room = None if budget is None else max(0, budget * len(lanes) - spent) + len(owed.valid)
        size = int(record.settings.get("matrix_cells") or whole_size or len(cells))
        try:
            # Asked before the plan grows in the store: a refused fill leaves the sweep as it was.
            hooks.on_cost(_cost(store, lanes, options, (size, strategy, False), owed, all_proofs, room))
        except BaseException:
            if record.status != "running":
                store.finish_sweep(sweep_id, record.status, record.ended_at)
            raise
        why = f"--strategy full: the cells the {stored} sweep did not run"
        for fill in fills.values():
            hooks.on_grow(store.add_cells(sweep_id, fill, "fill"), why)
        if strategy != stored:
            store.update_sweep_settings(sweep_id, {"strategy": strategy})
        if budget is not None and budget != record.settings.get("budget"):
            store.update_sweep_settings(sweep_id, {"budget": budget})
        hooks.on_plan(_joined(list(starts.values())))
        stopped, saved = run(store, sweep_id, matrix, options, hooks, lanes, proofs, starts, budget, resumed=True)
        return finish(store, sweep_id, options, members, stopped, saved)
    finally:
        for member in members:
            member.leave()


def _cost(
    store: Store, lanes: Sequence[Lane], options: SweepOptions, what: tuple[int, Strategy, bool], start: Preflight,
    proofs: Mapping[str, Proof], most: int | None,
) -> LaunchCost:  # fmt: skip
    """The cost question's figures: (matrix cells, strategy, by default), the lanes' hosts side by side."""
    host = lanes[0].first.config
    hosts = sum(len(lane.members) for lane in lanes)
    history = store.host_history(host.name)
    settings = options.settings
    estimate = plan_estimate(
        start, proofs, most, host, hosts, settings.deadlines, history, options.packed, settings.probes.load
    )
    return LaunchCost.of(*what, [p.cell.cell_id for p in start.valid], len(start.invalid), proofs, most, estimate)


def _joined(parts: Sequence[Preflight]) -> Preflight:
    return replace(parts[0], plans=[p for part in parts for p in part.plans])


def _launched(store: Store, sweep_id: str, preflight: Preflight, proofs: Mapping[str, Proof]) -> int:
    """Cells of the sweep that cost a launch: valid ones, less the known-bad ones skipped."""
    valid = {p.cell.cell_id for p in preflight.valid}
    return len([c for c in store.get_cells(sweep_id) if c.cell_id in valid and c.cell_id not in proofs])


def _record(
    sweep_id: str, matrix: Matrix, members: list[Member], lanes: list[Lane], settings: dict[str, Any]
) -> SweepRecord:
    first = lanes[0].first
    assert first.preflight is not None
    facts = dict(first.preflight.host_facts)
    if len(members) > 1:
        settings = settings | {
            "pool": [m.config.to_dict() for m in members],
            "lanes": {lane.name: [m.name for m in lane.members] for lane in lanes},
        }
        facts["pool"] = {
            m.name: m.preflight.host_facts | {"sglang": m.preflight.versions.get("sglang")}
            for m in members
            if m.preflight is not None
        }
    return SweepRecord(
        sweep_id=sweep_id, name=matrix.name, host=",".join(m.name for m in members), matrix_yaml=matrix.text,
        matrix_path=matrix.path, started_at=time.time(), host_facts=facts, versions=first.preflight.versions,
        settings=settings,
    )  # fmt: skip


__all__ = ["EventSink", "SweepHooks", "SweepOptions", "run_sweep"]  # what the commands and tests import from here
