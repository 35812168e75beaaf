"""What a sweep finds on the host after an interruption, and how it is settled before the sweep goes on.

The store says which runs were in flight (each is written before its launch) and which process
groups were ours (their pgids); the host's run directories say which launches exist (their pid
files). Together they let `--resume` re-attach to a launch still alive, clean up one that died,
end any group of ours that outlived its run, and never launch a cell twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from orchestrator.config.model import Matrix
from orchestrator.host.launcher import Launch, LaunchSpec
from orchestrator.host.session import HostSession
from orchestrator.model import Cell, Phase, Status
from orchestrator.planning.cells import CellPlan
from orchestrator.retries import port_race, retries_owed
from orchestrator.secret import SecretRef
from orchestrator.settings import RetryPolicy
from orchestrator.store.records import UNFINISHED_STATES, RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import launch_env, record_unlaunched, watch_attempt
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.preflight import Preflight, invalid_verdict
from orchestrator.sweep.scheduler import Job

EventSink = Callable[[Cell, str, Phase | None], None]


def settle_in_flight(
    store: Store,
    session: HostSession,
    open_session: Callable[[], HostSession],
    sweep_id: str,
    settings: RunSettings,
    on_reattach: Callable[[RunRecord, bool], None],
    on_event: EventSink | None = None,
    *,
    host: str | None = None,
    matrix: Matrix | None = None,
) -> None:
    """Follow in-flight launches still alive to their verdicts; abandon the rest, after stopping what is left.

    `host`: only the runs that were on that host (each host of a pool settles its own).

    The launches alive are followed at once, each over a session of its own, as the sweep ran them:
    they hold disjoint GPUs, and one at a time would keep the others' GPUs idle through every probe.
    """
    cells = {c.cell_id: c for c in store.get_cells(sweep_id)}
    alive_ones: list[tuple[Cell, str, Launch]] = []
    for run in store.unfinished_runs(sweep_id):
        if host is not None and run.host != host:
            continue
        cell = cells.get(run.cell_id)
        launch = recover_launch(session, run, cell, matrix)
        alive = launch is not None and session.launcher.alive(launch)
        on_reattach(run, alive)
        if launch is not None and alive and cell is not None:
            if run.state == "pending":  # launched, but killed before it could say so
                store.mark_launched(
                    run.run_id, run_dir=launch.spec.run_dir, pgid=launch.pgid or None, port=launch.spec.port or None,
                    gpus=launch.spec.gpus, job_id=launch.job_id,
                )  # fmt: skip
            # Its ready time counts from its launch, not from this re-attach (the store's clock is the wall's).
            launch.started_at = time.monotonic() - max(0.0, time.time() - run.started_at)
            alive_ones.append((cell, run.run_id, launch))
            continue
        if launch is not None:
            session.launcher.stop(launch, settings.deadlines.stop_grace)
        store.discard_run(run.run_id, time.time())

    def follow(item: tuple[Cell, str, Launch]) -> None:
        own = open_session()
        try:
            watch_attempt(store, own, item[0], item[1], item[2], settings, on_event)
        finally:
            own.close()

    if alive_ones:
        with ThreadPoolExecutor(max_workers=len(alive_ones), thread_name_prefix="reattach") as pool:
            try:
                list(pool.map(follow, alive_ones))
            except BaseException:
                session.placement.abandon()  # a batch job of ours must not run on unwatched
                raise


def recover_launch(
    session: HostSession, run: RunRecord, cell: Cell | None = None, matrix: Matrix | None = None
) -> Launch | None:
    """The launch of a run as its run directory records it (pid file), or None if it never started.

    Given its `cell`, the launch gets the secrets it was started with, read as a new launch's are (`launch_env`:
    host, install and matrix environment, the cell's secret flags) and handed to the launcher as `start` is handed
    them, so a re-attached server is probed with its API key and its log masked alike.
    """
    if not run.run_dir:
        return None
    if cell is None:
        return session.launcher.recover(recover_spec(run))
    secrets = launch_env(session.config, matrix, run.install, cell.flags.values())[1]
    return session.launcher.recover(recover_spec(run, api_key_words(cell)), secrets)


def api_key_words(cell: Cell) -> tuple[str | SecretRef, ...]:
    """The cell's `--api-key` and its secret as launch words: the one part of its command line a re-attached launch
    needs (the launcher reads the key its API demands from them); the rest would only be compared with what the
    server reports, and the store holds no more than the cell's flags."""
    key = cell.flags.get("api-key")
    return ("--api-key", key) if isinstance(key, SecretRef) else ()


def recorded_launch(run: RunRecord) -> Launch:
    """The launch of a run as the store recorded it (its process group or batch job), without asking the host."""
    return Launch(recover_spec(run), run.pgid or 0, job_id=run.job_id)


def recover_spec(run: RunRecord, argv: tuple[str | SecretRef, ...] = ()) -> LaunchSpec:
    """What the store knows of a run's launch, enough to find, follow and stop it (`argv`: the words of its command
    line it needs besides, see `secret_flags`)."""
    return LaunchSpec(
        run_id=run.run_id,
        argv=argv,
        env={},
        secret_names=(),
        gpus=tuple(run.gpus),
        port=run.port or 0,
        run_dir=run.run_dir or "",
        install=run.install,
    )


def our_pgids(store: Store, sweep_id: str, host: str | None = None) -> set[int]:
    """Every process group this sweep ever launched (on `host` only, when given)."""
    return {r.pgid for r in store.runs(sweep_id) if r.pgid is not None and (host is None or r.host == host)}


def reap_orphans(
    store: Store, session: HostSession, sweep_id: str, grace_s: float, *, host: str | None = None
) -> list[int]:
    """End the groups of this sweep's finished runs that are still alive (a stop that failed); their pgids.

    `host`: only the runs on that host (a pool's other hosts have their own process tables).
    """
    finished = [r for r in store.runs(sweep_id) if r.state not in UNFINISHED_STATES and host in (None, r.host)]
    # A process group of ours that outlived its run, or a batch job whose scancel failed (still queued).
    return session.placement.reap([recorded_launch(r) for r in finished], grace_s)


def record_invalid(store: Store, sweep_id: str, host: str, plan: CellPlan) -> None:
    """Record a cell preflight rejected: one finished run with the invalid verdict, never launched."""
    record_unlaunched(store, sweep_id, host, plan.cell, invalid_verdict(plan))


def finished_runs(store: Store, sweep_id: str) -> dict[str, list[RunRecord]]:
    """Cell id -> its runs that ran to a verdict, by attempt (skipped ones never ran)."""
    by_cell: dict[str, list[RunRecord]] = {}
    for run in sorted(store.runs(sweep_id), key=lambda r: r.attempt):
        if run.state == "done" and run.verdict is not None and run.verdict.status is not Status.SKIPPED:
            by_cell.setdefault(run.cell_id, []).append(run)
    return by_cell


def jobs_left(
    store: Store, sweep_id: str, preflight: Preflight, retries: int, policy: RetryPolicy | None = None
) -> list[Job]:
    """Cells that still owe an attempt: no verdict yet (never run, abandoned, skipped), or failed with retries left.

    Decided as the scheduler decides after an attempt (retries.decide_after over the finished runs in order, port
    races not counted), each job carrying those runs' verdicts and the ports lost to races, so the sweep goes on
    as if it had never stopped.
    """
    done = finished_runs(store, sweep_id)
    jobs = []
    for plan in preflight.valid:
        runs = done.get(plan.cell.cell_id, [])
        history = tuple(r.verdict for r in runs if r.verdict is not None)
        if retries_owed(history, policy or RetryPolicy(), retries):
            raced = frozenset(r.port for r in runs if r.verdict is not None and port_race(r.verdict) and r.port)
            jobs.append(Job(plan, len(runs) + 1, history, raced))
    return jobs
