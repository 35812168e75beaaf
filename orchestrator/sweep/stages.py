"""The stages the engine strings together: a host rejoining a resumed sweep, the lanes run, the sweep finished."""

from __future__ import annotations

import time

from orchestrator.config.model import Matrix
from orchestrator.errors import OrchestratorError, TransportError
from orchestrator.planning.installs import install_changes
from orchestrator.planning.known_bad import Proof
from orchestrator.store.records import SweepRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.agreement import review_answers
from orchestrator.sweep.hostdown import HostWatch
from orchestrator.sweep.lanes import Lane, LaneRun, Member, run_lanes
from orchestrator.sweep.options import SweepHooks, SweepOptions, SweepOutcome
from orchestrator.sweep.plan_steps import Launcher, adapt
from orchestrator.sweep.preflight import Preflight
from orchestrator.sweep.recover import jobs_left, reap_orphans, settle_in_flight
from orchestrator.sweep.scheduler import Job, Scheduler
from orchestrator.sweep.suspects import Suspects


def rejoin(
    store: Store, member: Member, sweep_id: str, matrix: Matrix, options: SweepOptions, hooks: SweepHooks
) -> None:
    """Connect, take the lock again, and settle this host's runs that were in flight (re-attach or abandon)."""
    try:
        session = member.hold(sweep_id)
        settle_in_flight(
            store, session, member.open_session, sweep_id, options.settings, hooks.on_reattach, hooks.on_event,
            host=member.name, matrix=matrix,
        )  # fmt: skip
        # Before preflight, whose check for foreign GPU holders would take these for strangers'.
        reap_orphans(store, session, sweep_id, options.settings.deadlines.stop_grace, host=member.name)
    except OrchestratorError as exc:
        member.error = exc
        hooks.on_host(member.name, f"host {member.name} left out of the resumed sweep: {exc}")
        member.leave()


def run(
    store: Store,
    sweep_id: str,
    matrix: Matrix,
    options: SweepOptions,
    hooks: SweepHooks,
    lanes: list[Lane],
    proofs: dict[str, dict[str, Proof]],
    starts: dict[str, Preflight],
    budget: int | None,
    *,
    resumed: bool = False,
) -> tuple[bool, int]:
    """Run the first cells of every lane together, then (adaptive) each lane's localisation.

    Returns whether an infra verdict stopped the sweep, and the launches the retry policy saved.
    """
    made: list[Scheduler] = []
    suspects: dict[str, Suspects] = {}
    for lane in lanes:  # one record per lane: its hosts take each other's cells
        shared = Suspects([m.name for m in lane.members], hooks.on_host)
        suspects.update((m.name, shared) for m in lane.members)

    def scheduler(member: Member, pooled: bool, watch: HostWatch) -> Scheduler:
        assert member.session is not None
        session = member.session
        made.append(Scheduler(
            store, lambda: session.placement.worker_session(member.breaker), session, sweep_id, options.settings,
            options.retries, packed=options.packed, matrix=matrix, on_event=hooks.on_event, on_result=hooks.on_result,
            stop_on_infra=options.on_infra == "stop", watch=watch, shared=pooled, max_queued=options.max_queued,
            retry=options.retry, suspects=suspects.get(member.name),
        ))  # fmt: skip
        return made[-1]

    lane_run = LaneRun(store, sweep_id, scheduler, options.wait_for_host_s, hooks.on_host, hooks.on_result)

    def launcher(lane: Lane, *, now: bool) -> Launcher:
        def queue(jobs: list[Job]) -> bool:
            lane.queue.extend(jobs)
            return run_lanes(lane_run, [lane]) if now else False

        return Launcher(store, sweep_id, lane.first.name, hooks.on_result, proofs[lane.name], queue)

    for lane in lanes:
        jobs = [Job(p, 1) for p in starts[lane.name].valid]
        if resumed:
            jobs = jobs_left(store, sweep_id, starts[lane.name], options.retries, options.retry)
        launcher(lane, now=False)(jobs)
    stopped = run_lanes(lane_run, lanes)
    if options.strategy == "adaptive" and budget is not None:
        for lane in lanes:
            if stopped or lane.preflight is None:
                break
            run = launcher(lane, now=True)
            stopped = adapt(store, sweep_id, matrix.retries, lane.preflight, budget, run, hooks.on_grow)
    return stopped, sum(s.saved for s in made)


def refuse_changed_install(record: SweepRecord, host: str, now: Preflight) -> None:
    """A resume on another install than the sweep's would mix two installs' verdicts under one label."""
    changes = install_changes(record.versions, now.versions)
    if changes:
        raise OrchestratorError(
            f"the SGLang install on {host} changed since sweep {record.sweep_id} started "
            f"({'; '.join(map(str, changes))}): finishing it there would mix two installs' verdicts in one table "
            f"(fix: start a new sweep of {record.matrix_path or 'the matrix'} on this install; then "
            f"`orchestrator compare {record.sweep_id} NEW` shows what the change did)"
        )


def finish(
    store: Store, sweep_id: str, options: SweepOptions, members: list[Member], stopped: bool, saved: int
) -> SweepOutcome:
    outcome = SweepOutcome(sweep_id, saved_launches=saved)
    for member in members:
        if member.session is None:
            continue
        try:
            # A launch whose stop failed (host unreachable at the time) must not outlive the sweep.
            reap_orphans(store, member.session, sweep_id, options.settings.deadlines.stop_grace, host=member.name)
        except TransportError as exc:
            if member.breaker.tripped is None:
                raise
            outcome.unchecked[member.name] = str(exc)
    for member in members:
        trip = member.breaker.tripped
        if trip is not None and member.name not in outcome.unchecked:
            outcome.unchecked[member.name] = f"down since the sweep ran: {trip.reason}"
    # Only across the whole sweep does an answer that reads well show as wrong: it disagrees with the rest.
    review_answers(store, sweep_id, options.settings.probes)
    store.finish_sweep(sweep_id, "interrupted" if stopped else "done", time.time())
    return outcome
