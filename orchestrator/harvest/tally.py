"""Bounded running tallies the evidence builder keeps while it reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.harvest.records import Counted, LogLine
from orchestrator.harvest.tracebacks import OpenTraceback
from orchestrator.knowledge.markers import MarkerSpec
from orchestrator.model import Phase

MAX_DISTINCT = 200
"""Distinct warnings (errors, CUDA errors, deprecations) kept; later new ones are not."""


@dataclass
class HitTally:
    """A signature hit: its first line and how many times that very line was printed."""

    line: LogLine
    phase: Phase | None
    leads: bool
    tb: OpenTraceback | None
    count: int = 1


@dataclass
class _Count:
    text: str
    line: LogLine
    count: int = 1


@dataclass
class MessageTally:
    """Distinct messages with counts, first occurrence kept, bounded."""

    items: dict[str, _Count] = field(default_factory=dict)

    def add(self, key: str, text: str, line: LogLine) -> None:
        """Count one more occurrence of `key` (shown as `text`, first seen at `line`)."""
        item = self.items.get(key)
        if item is not None:
            item.count += 1
        elif len(self.items) < MAX_DISTINCT:
            self.items[key] = _Count(text, line)

    def counted(self) -> list[Counted]:
        """The distinct messages in first-seen order."""
        return [Counted(c.text, c.count, c.line.ts, c.line.line_no) for c in self.items.values()]


@dataclass
class MarkerTally:
    """A marker's first line and how many lines carried it."""

    spec: MarkerSpec
    line: LogLine
    count: int = 1
