"""Following a launch's log while it runs: evidence, the phase reached, the first fatal line, progress, flag lines."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from orchestrator.harvest.evidence import Evidence, EvidenceBuilder
from orchestrator.harvest.fetch import LogTail, harvest_huge
from orchestrator.harvest.needles import HOST_GREP_REGEX
from orchestrator.knowledge.fatal import is_fatal_line
from orchestrator.knowledge.markers import phase_of_line
from orchestrator.model import Phase
from orchestrator.probe.drift import FlagLines
from orchestrator.probe.progress import ProgressTracker
from orchestrator.probe.ready import LogProgress
from orchestrator.secret import Masker
from orchestrator.transport.base import Transport

LIVE_LOG_BUDGET = 64 << 20
"""Bytes of log streamed whole; past this the final harvest moves only what matters (harvest_huge)."""

PhaseCallback = Callable[[str, Phase | None], None]


class LiveLog:
    """Feeds new log lines to the evidence builder while tracking the phase reached and fatal lines."""

    def __init__(
        self,
        tail: LogTail,
        started: float,
        on_phase: PhaseCallback | None = None,
        masker: Masker | None = None,
        flags: Iterable[str] = (),
    ):
        self.tail = tail
        self.masker = masker or Masker()
        self.builder = EvidenceBuilder(self.masker)
        self.started = started
        self.phase: Phase | None = None
        self.fatal_line: str | None = None
        self.listening_line: str | None = None
        """The server's own `Uvicorn running on http://HOST:PORT` line, once printed."""
        self.progress = ProgressTracker()
        self.flag_lines = FlagLines(flags)
        """Lines that name a flag of the launch (evidence of a flag the server changed), masked."""
        self.progress_at: float | None = None
        """time.monotonic() when the log last showed progress (a new line, a bar that moved)."""
        self.timings: dict[str, float] = {}
        self.overflowed = False
        self._on_phase = on_phase

    def poll(self) -> LogProgress:
        """Read the new bytes and report where the launch is."""
        if not self.overflowed:
            self._feed(self.tail.read_new())
            self.overflowed = self.tail.offset > LIVE_LOG_BUDGET
        return LogProgress(self.phase, self.fatal_line, self.progress_at, self.masked_progress_line)

    @property
    def masked_progress_line(self) -> str | None:
        """The last line that showed progress, secrets masked (it may become a verdict's evidence)."""
        line = self.progress.last_line
        return self.masker.text(line) if line is not None else None

    def drain(self) -> None:
        """Read everything left (the server is gone or stopping)."""
        if not self.overflowed:
            self._feed(self.tail.drain())
            self.overflowed = self.tail.offset > LIVE_LOG_BUDGET

    def _feed(self, lines: list[bytes]) -> None:
        for raw in lines:
            self.builder.feed_line(raw)
            line = raw.decode("utf-8", errors="replace")
            phase = phase_of_line(line)
            if phase is not None and (self.phase is None or phase.order > self.phase.order):
                self.phase = phase
                self.timings.setdefault(phase.value, round(time.monotonic() - self.started, 3))
                if self._on_phase:
                    self._on_phase("phase", phase)
            if self.fatal_line is None and is_fatal_line(line):
                self.fatal_line = self.masker.text(line)
            if "Uvicorn running on " in line:
                self.listening_line = line
            if self.progress.feed(line):
                self.progress_at = time.monotonic()
            if self.flag_lines.wants(line):
                self.flag_lines.lines.append(self.masker.text(line.strip()))

    def final_evidence(self, transport: Transport) -> Evidence:
        """The evidence once the launch is stopped: all of it streamed, or (a huge log) what matters, read there."""
        if not self.overflowed:
            return self.builder.finish()
        harvested = harvest_huge(transport, self.tail.path, HOST_GREP_REGEX)
        builder = EvidenceBuilder(self.masker)
        for line, number in zip(harvested.lines, harvested.line_numbers, strict=True):
            builder.feed_line(line, number)
        return builder.finish()
