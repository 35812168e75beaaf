"""One attempt at one cell, bracketed by the store: the run row is written before the launch.

Whatever happens between `create_run` and `finish_run` (the server crashing, the host
vanishing, the orchestrator being killed) leaves the store and the host's run directory
consistent enough for `--resume` to re-attach or clean up, never to launch twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from orchestrator.classify.unlaunched import infra_verdict
from orchestrator.config.hosts import resolve_host_env
from orchestrator.config.model import HostConfig, Matrix, masked_env
from orchestrator.errors import LaunchError, OrchestratorError, TransportError
from orchestrator.harvest.live import PhaseCallback
from orchestrator.host.facts import GpuHolder
from orchestrator.host.launcher import Launch, LaunchSpec
from orchestrator.host.session import HostSession
from orchestrator.model import Cell, Phase, Verdict
from orchestrator.planning.cells import CellPlan, flag_secrets, launch_argv
from orchestrator.secret import MASK, SecretRef
from orchestrator.store.records import RunRecord, new_run_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.execute import RunSettings, execute_run


@dataclass(frozen=True)
class Slot:
    """Where one attempt runs: its GPUs and port."""

    gpus: tuple[int, ...]
    port: int


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt came to, and whether its GPUs are free again."""

    cell: Cell
    run_id: str
    verdict: Verdict
    slot: Slot
    gpus_released: bool
    leftover_holders: tuple[GpuHolder, ...] = ()


def launch_env(
    host: HostConfig, matrix_env: Matrix | None, install: str | None, flags: Iterable[object] = (),
    environ: Mapping[str, str] = os.environ,
) -> tuple[dict[str, str], dict[str, str]]:  # fmt: skip
    """(plain, secret) environment of a launch, secrets read now: host < install < matrix, and the values of the
    secret flags among `flags` (its command line, or a re-attached launch's cell flags).

    The one place a launch's secrets are decided: a new launch and a re-attached one ask it, so both mask the same.
    """
    # Through hosts.yaml's own lines: an unset secret variable is named with the file and line that reads it.
    env = {**host.env_for(install), **(matrix_env.env if matrix_env else {})}
    plain, secrets = resolve_host_env(host, env, environ)
    return plain, secrets | flag_secrets([f for f in flags if isinstance(f, SecretRef)], environ)


def build_spec(
    session: HostSession, plan: CellPlan, slot: Slot, run_id: str, matrix: Matrix | None
) -> tuple[LaunchSpec, dict[str, str]]:
    """The launch spec of an attempt and the secrets it needs (kept apart: never stored)."""
    argv = launch_argv(session.launcher_words(plan.cell.install), plan, slot.port)
    plain, secrets = launch_env(session.config, matrix, plan.cell.install, argv)
    env = {**session.base_env, **plain}
    env.update(session.placement.visible_devices(slot.gpus))
    spec = LaunchSpec(
        run_id=run_id,
        argv=argv,
        env=env,
        secret_names=tuple(sorted(secrets)),
        gpus=slot.gpus,
        port=slot.port,
        run_dir=session.run_dir(run_id),
        install=plan.cell.install,
        gpu_count=plan.cell.tp_size,
    )
    return spec, secrets


def record_unlaunched(
    store: Store, sweep_id: str, host: str, cell: Cell, verdict: Verdict,
    on_result: Callable[[AttemptResult], None] | None = None,
) -> None:  # fmt: skip
    """Record a verdict reached without a launch (invalid, skipped, GPUs held): one finished run row, reported to
    `on_result` as an attempt that held no GPU."""
    run_id = new_run_id()
    now = time.time()
    store.create_run(RunRecord(
        run_id=run_id, sweep_id=sweep_id, cell_id=cell.cell_id, attempt=store.next_attempt(sweep_id, cell.cell_id),
        host=host, started_at=now, install=cell.install,
    ))  # fmt: skip
    store.finish_run(run_id, outcome=None, evidence=None, verdict=verdict, timings={}, ended_at=now)
    if on_result is not None:
        on_result(AttemptResult(cell, run_id, verdict, Slot((), 0), True))


def run_attempt(
    store: Store,
    session: HostSession,
    sweep_id: str,
    plan: CellPlan,
    slot: Slot,
    settings: RunSettings,
    matrix: Matrix | None,
    on_event: Callable[[Cell, str, Phase | None], None] | None = None,
) -> AttemptResult:
    """Launch one cell once (its first attempt or a retry), record everything, and always leave the host clean."""
    spec, secrets = build_spec(session, plan, slot, new_run_id(), matrix)
    return launch_attempt(store, session, sweep_id, plan.cell, spec, secrets, settings, on_event)


def launch_attempt(
    store: Store,
    session: HostSession,
    sweep_id: str,
    cell: Cell,
    spec: LaunchSpec,
    secrets: Mapping[str, str],
    settings: RunSettings,
    on_event: Callable[[Cell, str, Phase | None], None] | None = None,
) -> AttemptResult:
    """The one attempt pipeline (a sweep's cells, retries, `run`, `repro`): record, launch, follow, record the verdict.

    The run row is written before the launch, numbered by the store; a launch whose reply was lost is
    found by its pid file and stopped; a launch that started is followed by `watch_attempt`.
    """
    slot = Slot(spec.gpus, spec.port)
    began = time.monotonic()
    store.create_run(
        RunRecord(
            run_id=spec.run_id,
            sweep_id=sweep_id,
            cell_id=cell.cell_id,
            # Numbered by the store: abandoned runs keep their numbers, and never count as attempts.
            attempt=store.next_attempt(sweep_id, cell.cell_id),
            host=session.config.name,
            run_dir=spec.run_dir,
            port=spec.port,
            gpus=spec.gpus,
            command=spec.command_line,
            env_masked=masked_env(spec.env, session.config.secrets) | dict.fromkeys(secrets, MASK),
            started_at=time.time(),
            install=spec.install,
        )
    )
    stored_s = time.monotonic() - began
    if on_event:
        on_event(cell, "launching", None)  # the live view times the attempt from here, not its first log line
    try:
        launch = session.launcher.start(spec, secrets)
    except (LaunchError, TransportError) as exc:
        _stop_unreported(session, spec, settings, secrets)
        failed = infra_verdict(exc, Phase.PREFLIGHT)
        verdict = dataclasses.replace(failed, reason=f"not launched: {failed.reason}")
        store.finish_run(spec.run_id, outcome=None, evidence=None, verdict=verdict, timings={}, ended_at=time.time())
        return AttemptResult(cell, spec.run_id, verdict, slot, True)
    began = time.monotonic()
    try:
        store.mark_launched(
            spec.run_id, run_dir=spec.run_dir, pgid=launch.pgid or None, port=spec.port or None, gpus=spec.gpus,
            job_id=launch.job_id,
        )  # fmt: skip
    except OrchestratorError:
        # The store cannot follow it (full, or gone): a server nobody records must not run on holding GPUs.
        _stop_quietly(session, launch, settings)
        raise
    stored_s += time.monotonic() - began
    return watch_attempt(store, session, cell, spec.run_id, launch, settings, on_event, stored_s=stored_s)


def watch_attempt(
    store: Store,
    session: HostSession,
    cell: Cell,
    run_id: str,
    launch: Launch,
    settings: RunSettings,
    on_event: Callable[[Cell, str, Phase | None], None] | None = None,
    *,
    stored_s: float = 0.0,
) -> AttemptResult:
    """Follow a launched attempt (new or re-attached) to its verdict and record it.

    `stored_s`: seconds the store's writes of this attempt took so far (its run row, its launch), recorded with
    its own timings as `store_s` (the final write's own time shows as the gap before the next cell).
    """
    slot = Slot(launch.spec.gpus, launch.spec.port)
    callback: PhaseCallback | None = (lambda event, phase: on_event(cell, event, phase)) if on_event else None
    try:
        report = execute_run(session, launch, settings, on_event=callback)
    except OrchestratorError as exc:
        _stop_quietly(session, launch, settings)
        verdict = infra_verdict(exc)
        store.finish_run(run_id, outcome=None, evidence=None, verdict=verdict, timings={}, ended_at=time.time())
        return AttemptResult(cell, run_id, verdict, slot, False)
    ran = report.launch
    began = time.monotonic()
    if ran.job_id is not None:
        store.set_placement(run_id, node=ran.node, port=ran.spec.port, gpus=ran.spec.gpus)
        slot = Slot(ran.spec.gpus, ran.spec.port)
    report.timings["store_s"] = round(stored_s + time.monotonic() - began, 4)
    store.finish_run(
        run_id,
        outcome=report.outcome,
        evidence=report.evidence.to_dict(),
        verdict=report.verdict,
        timings=report.timings,
        ended_at=time.time(),
    )
    return AttemptResult(cell, run_id, report.verdict, slot, report.gpus_released, tuple(report.leftover_holders))


def _stop_unreported(session: HostSession, spec: LaunchSpec, settings: RunSettings, secrets: Mapping[str, str]) -> None:
    # The launch may have started and lost only its reply: its pid file says so, and it must not run on.
    with contextlib.suppress(OrchestratorError):
        launch = session.launcher.recover(spec, secrets)
        if launch is not None:
            session.launcher.stop(launch, settings.deadlines.stop_grace)


def _stop_quietly(session: HostSession, launch: Launch, settings: RunSettings) -> None:
    # When the host is unreachable, resume finds the launch again by its run directory.
    with contextlib.suppress(OrchestratorError):
        session.launcher.stop(launch, settings.deadlines.stop_grace)
