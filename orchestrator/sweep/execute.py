"""The per-launch core every sweep repeats: launch, wait ready, probe, harvest, stop, classify.

A server's failure is data here, never an exception: whatever the server does ends as a
Verdict. Only the orchestrator's own failures (host unreachable, run dir unwritable) propagate,
and the caller turns them into status `infra`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import Evidence
from orchestrator.harvest.fetch import LogTail
from orchestrator.harvest.live import LiveLog, PhaseCallback
from orchestrator.host.facts import GpuHolder, NoGpuReading
from orchestrator.host.launcher import Launch
from orchestrator.host.session import HostSession
from orchestrator.model import Phase, ProbeOutcome, ProbeResult, Verdict
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.decode import run_probes
from orchestrator.probe.drift import asked_flags, find_drift
from orchestrator.probe.load import run_load
from orchestrator.probe.ready import wait_ready
from orchestrator.secret import Masker, SecretRef
from orchestrator.settings import Deadlines, ProbeSettings, Stall

REPROBES_AFTER_DROP = 2
"""Times the probes are repeated on the same server after the SSH connection dropped under them."""

QUEUED_EVENT = "queued"
"""The event of a launch still waiting in a batch scheduler's queue (`queued: pending (Resources)`)."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSettings:
    """Limits and probes for one run (stored with it, so repro reuses them)."""

    deadlines: Deadlines = field(default_factory=Deadlines)
    probes: ProbeSettings = field(default_factory=ProbeSettings)
    stall: Stall = field(default_factory=Stall)
    """How long each startup phase may show no progress before the launch is a hang."""


@dataclass
class RunReport:
    """What one launch came to."""

    outcome: ProbeOutcome
    evidence: Evidence
    verdict: Verdict
    timings: dict[str, float]
    launch: Launch
    """The launch as it ran (a batch job's node, port and GPUs are known only once it runs)."""
    gpus_released: bool = True
    leftover_holders: list[GpuHolder] = field(default_factory=list)


def execute_run(
    session: HostSession,
    launch: Launch,
    settings: RunSettings,
    *,
    on_event: PhaseCallback | None = None,
) -> RunReport:
    """Watch one started (or re-attached) server: wait ready, probe, harvest, stop, and name the outcome."""
    launcher, placement = session.launcher, session.placement
    # A batch job first waits in the queue: its launch starts when it runs, and only then has a port.
    on_wait = (lambda state: on_event(f"{QUEUED_EVENT}: {state}", None)) if on_event else None
    launch, client = placement.reach(launch, on_wait)
    started = launch.started_at
    spec = launch.spec
    asked = asked_flags([w for w in spec.argv if not isinstance(w, SecretRef)])
    live = LiveLog(
        LogTail(session.transport, spec.log_path), started, on_event, Masker(launch.secret_values), flags=asked
    )
    info: dict[str, Any] | None = None
    for name, value in (("pending_s", launch.pending_s), ("prepare_s", launch.prepare_s), ("spawn_s", launch.spawn_s)):
        if value is not None:
            live.timings[name] = value
    probes: tuple[ProbeResult, ...] = ()
    speed: dict[str, Any] | None = None
    try:
        ready = wait_ready(
            client, is_alive=lambda: launcher.alive(launch), poll_log=live.poll, deadlines=settings.deadlines,
            stall=settings.stall, started=launch.started_at,
        )  # fmt: skip
        if (
            ready.ready
            and not _says_listening(live, spec.port)
            and placement.port_owner(spec.port, launch.pgid) == "foreign"
        ):
            # Another server answered on our port (ours lost the race to bind it): probing it would
            # judge the wrong server. Our launch is dying of the bind error; let its log say so.
            ready = wait_ready(
                _NeverReady(), is_alive=lambda: launcher.alive(launch), poll_log=live.poll, deadlines=settings.deadlines
            )
        if ready.ready:
            live.timings["ready"] = round(time.monotonic() - started, 3)
            if on_event:
                on_event("ready", Phase.READY)
            info = client.server_info()  # what it runs with, after every change SGLang made at start
            probes = _probe_through_drops(session, launch, client, settings, on_event)
            live.timings["probes_done"] = round(time.monotonic() - started, 3)
            # One load at a time per machine (a figure measured beside a sibling's load is not the cell's own).
            speed = _measure_speed(client, settings, probes, launch.node or session.config.name)
    finally:
        marks = _Marks(live.timings)
        client.close()
        live.drain()
        # Read before our own stop: only a server that ended by itself leaves an exit code, and
        # then the (costlier) liveness check is not needed.
        exit_code = launcher.exit_code(launch)
        # The fatal line, not `ready`: `ready` is unset when a signal cut the wait.
        died_alone, killed = placement.ended(launch, exit_code, live.fatal_line is not None)
        marks.mark("harvest_s")
        sigkilled, gpus_after = placement.stop(launch, settings.deadlines.stop_grace)
        if sigkilled:
            # Survived SIGTERM for the whole grace (ranks hung in shutdown): worth seeing in the record.
            live.timings["sigkill_after_s"] = settings.deadlines.stop_grace
        marks.mark("stop_s")
        live.drain()
    evidence = live.final_evidence(session.transport)
    drift = find_drift(asked, evidence.server_args, info, live.flag_lines.lines) if ready.ready else {}
    marks.mark("harvest_s")  # the last log bytes after the stop count as harvest too
    outcome = ProbeOutcome(
        reached_ready=ready.ready,
        ready_s=ready.ready_s,
        probes=probes,
        process_died=ready.died or died_alone,
        deadline_phase=ready.deadline_phase,
        exit_code=exit_code,
        stalled_s=round(ready.stalled_s, 1) if ready.stalled_s is not None else None,
        last_progress=ready.progress_line,
        drift={flag: d.to_dict() for flag, d in drift.items()},
        speed=speed,
        scheduler_end=killed,
    )
    verdict = classify(evidence, outcome)
    marks.mark("classify_s")
    try:
        released, leftovers = placement.wait_released(spec.gpus, settings.deadlines.gpu_release, gpus_after)
    except NoGpuReading as exc:
        # The verdict stands (it is the server's); its GPUs are not handed out again while nobody can read them.
        log.warning("%s: GPUs of %s not verified free: %s", session.config.name, spec.run_id, exc.problem)
        released, leftovers = False, []
    marks.mark("gpu_free_s")
    live.timings["total"] = round(time.monotonic() - started, 3)
    return RunReport(outcome, evidence, verdict, live.timings, launch, released, leftovers)


class _Marks:
    """Durations of the steps after the probes, added into a run's timings (`harvest_s`, `stop_s`, ...)."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.monotonic()

    def mark(self, name: str) -> None:
        """Add the time since the previous mark to `name` (a step done in two pieces adds up)."""
        now = time.monotonic()
        self.timings[name] = round(self.timings.get(name, 0.0) + now - self.last, 4)
        self.last = now


def _probe_through_drops(
    session: HostSession, launch: Launch, client: ProbeClient, settings: RunSettings, on_event: PhaseCallback | None
) -> tuple[ProbeResult, ...]:
    """Run the probes; when the SSH connection under them dropped and the server lives on, run them again.

    A request cut off with the connection says nothing about the server, so a failure is only
    believed when the connection held. The whole sequence is repeated, on the same server.
    """
    for attempt in range(REPROBES_AFTER_DROP + 1):
        epoch = session.transport.connection_epoch
        probes = run_probes(
            client,
            settings.probes,
            is_alive=lambda: session.launcher.alive(launch),
            deadlines=settings.deadlines,
            on_probe=(lambda name: on_event("probe", _probe_phase(name))) if on_event else None,
        )
        if all(p.ok for p in probes) or attempt == REPROBES_AFTER_DROP:
            break
        # Liveness first: it reconnects over a dead connection, which is what moves the epoch.
        if not session.launcher.alive(launch) or session.transport.connection_epoch == epoch:
            break
        log.warning("%s: the connection dropped during the probes of %s; probing it again", session.config.name,
                    launch.spec.run_id)  # fmt: skip
    return probes


class _NeverReady:
    """A health source for a launch whose port another server holds: it can never be ready."""

    def health_generate(self, timeout: float = 1.0) -> int | None:
        """Always unreachable."""
        return None


def _says_listening(live: LiveLog, port: int) -> bool:
    """Whether our server's log says it bound the port (then nobody else can answer there; no need to ask the host)."""
    return live.listening_line is not None and f":{port} " in live.listening_line


def _measure_speed(
    client: ProbeClient, settings: RunSettings, probes: tuple[ProbeResult, ...], machine: str
) -> dict[str, Any] | None:
    """The standard load's `speed` on a launch whose probes all passed (None: a probe failed, or `load: off`)."""
    load = settings.probes.load
    if load is None or not probes or not all(p.ok for p in probes):
        return None
    return run_load(client, settings.probes, load, timeout=settings.deadlines.probe, host=machine)


def _probe_phase(name: str) -> Phase:
    return ProbeResult(name=name, ok=True).phase
