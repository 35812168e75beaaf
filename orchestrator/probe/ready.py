"""Readiness: wait for `/health_generate` 200 while watching the process group and its log.

Each round checks, in this order, that the process group is alive, the new bytes of the log
(the caller reads them and runs the marker detector), and `/health_generate`; then it sleeps
only what is left of `poll_interval`. A death or a fatal log line ends the wait at once, so a
crash is a verdict within about one round, never at a timeout.

A plain loop rather than a tenacity policy (STYLE practice 10 prefers those): the deadline
that applies moves with the phase the log has reached (each per-phase deadline starts when
its phase begins), the wait ends with one of four verdicts rather than "gave up", and
tenacity's `stop_after_delay` reads `time.monotonic` itself, so an injected clock could not
drive it. The loop takes its clock and sleep instead.

Deadlines: `model_load`, `memory_alloc` and `cuda_graph_capture` each run from when the log
was first seen in that phase; `ready` runs from the start of the wait. Phases without a
deadline of their own (import, warm-up) are bounded by `ready` alone. On expiry the phase
reached is recorded; with no startup marker in the log yet, that is `Phase.IMPORT`, because a
process that is alive but has printed nothing is still importing (argument errors exit at once).
A stall window (settings.Stall) bounds each phase by its progress instead: no new line and no bar moving
for that long is a hang, whatever the deadline would still allow.
Exceptions from the caller's `is_alive` or `poll_log` (a lost SSH connection) are not caught:
they are infra failures, not the server's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from orchestrator.model import Phase
from orchestrator.settings import Deadlines, Stall

HEALTH_TIMEOUT_S = 1.0
"""One `/health_generate` poll; short, so a poll never delays noticing a death."""
POLL_INTERVAL_S = 0.025
"""A round is three small reads (a /proc entry, the log's new bytes, one HTTP request), a few ms even
over SSH, so polling often costs little and both a crash and readiness are seen within ~25 ms."""
WARMUP_POLL_INTERVAL_S = 0.01
"""Once the log shows the warm-up (graphs captured, the HTTP server starting), readiness is a warm-up
request away: rounds this often, for those few seconds only, see it sooner."""


class HealthSource(Protocol):
    """What the wait needs of the probe client."""

    def health_generate(self, timeout: float = ...) -> int | None:
        """Status of `/health_generate`, or None when nothing answered."""


@dataclass(frozen=True)
class LogProgress:
    """What the caller's log reader saw so far: the furthest startup phase and a fatal line."""

    phase: Phase | None = None
    fatal_line: str | None = None
    progress_at: float | None = None
    """When (on the wait's clock) the log last showed progress: a new line, a bar that advanced."""
    progress_line: str | None = None
    """That line."""


@dataclass(frozen=True)
class ReadyResult:
    """How the wait for readiness ended."""

    ready: bool
    ready_s: float | None = None
    phase: Phase | None = None
    """The last phase reached (`Phase.READY` once `/health_generate` answered 200)."""
    died: bool = False
    fatal_line: str | None = None
    deadline_phase: Phase | None = None
    """Set when a deadline expired, or the phase went without progress for its stall window: where it was stuck."""
    stalled_s: float | None = None
    """Set when the launch was cut for no progress: seconds since its last progress (a new line, a bar moving)."""
    progress_line: str | None = None
    """The last line that showed progress, when cut for none since."""
    polls: int = 0
    """`/health_generate` requests sent."""
    last_status: int | None = None
    """The last `/health_generate` status; None when nothing answered (not listening yet)."""
    elapsed_s: float = 0.0


def _phase_limit(deadlines: Deadlines, phase: Phase | None) -> float | None:
    limits = {
        Phase.MODEL_LOAD: deadlines.model_load,
        Phase.MEMORY_ALLOC: deadlines.memory_alloc,
        Phase.CUDA_GRAPH_CAPTURE: deadlines.cuda_graph_capture,
    }
    return limits.get(phase) if phase is not None else None


def _further(current: Phase | None, seen: Phase | None) -> Phase | None:
    if seen is None or (current is not None and current.order >= seen.order):
        return current
    return seen


def wait_ready(
    client: HealthSource,
    *,
    is_alive: Callable[[], bool],
    poll_log: Callable[[], LogProgress],
    deadlines: Deadlines,
    stall: Stall | None = None,
    started: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_interval: float = POLL_INTERVAL_S,
    warmup_poll_interval: float = WARMUP_POLL_INTERVAL_S,
    health_timeout: float = HEALTH_TIMEOUT_S,
) -> ReadyResult:
    """Poll until `/health_generate` is 200, the process dies, the log shows a fatal line, or a deadline expires.

    With `stall`, a phase that shows no progress for its window ends the wait too: a hang is told from a
    slow start by what the log keeps printing, not by how long the slowest host may take.
    """
    for name, interval in (("poll_interval", poll_interval), ("warmup_poll_interval", warmup_poll_interval)):
        if not 0 < interval <= 1.0:
            raise ValueError(f"{name} must be in (0, 1] s, got {interval}")
    # `started`: when the launch began, on `clock` (a re-attached launch began before this wait, and its ready time
    # and its whole-startup deadline count from then, not from the re-attach).
    start = clock() if started is None else min(started, clock())
    phase: Phase | None = None
    phase_since = start
    polls = 0
    status: int | None = None

    def result(**outcome: Any) -> ReadyResult:
        so_far = ReadyResult(ready=False, phase=phase, polls=polls, last_status=status, elapsed_s=clock() - start)
        return replace(so_far, **outcome)

    while True:
        tick = clock()
        if not is_alive():
            # The last bytes written before a death usually hold its cause: read them once more.
            final = poll_log()
            return result(died=True, phase=_further(phase, final.phase), fatal_line=final.fatal_line)
        progress = poll_log()
        reached = _further(phase, progress.phase)
        if reached is not phase:
            phase, phase_since = reached, tick
        if progress.fatal_line is not None:
            return result(fatal_line=progress.fatal_line)
        status = client.health_generate(timeout=health_timeout)
        polls += 1
        now = clock()
        if status == 200:
            return result(ready=True, ready_s=now - start, phase=Phase.READY)
        limit = _phase_limit(deadlines, phase)
        if (limit is not None and now - phase_since >= limit) or now - start >= deadlines.ready:
            return result(deadline_phase=phase or Phase.IMPORT)
        window = stall.window((phase or Phase.IMPORT).value) if stall is not None else None
        last = max(start, phase_since, progress.progress_at or start)
        if window is not None and now - last >= window:
            return result(
                deadline_phase=phase or Phase.IMPORT, stalled_s=now - last, progress_line=progress.progress_line
            )
        warming = phase is not None and phase.order >= Phase.WARMUP.order
        interval = min(poll_interval, warmup_poll_interval) if warming else poll_interval
        pause = tick + interval - clock()
        if pause > 0:
            sleep(pause)
