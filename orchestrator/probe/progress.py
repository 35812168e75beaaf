"""Pure: whether a log line is startup progress, or only the same thing said again.

A loading server shows progress: new log lines, and progress bars that advance (tqdm's `i/N` of checkpoint
shards, of captured batch sizes). A stuck one shows none, but may still print: a heartbeat repeated with a
new timestamp, or a bar redrawn at the same count with a longer elapsed time. So a line is progress when
its text, numbers aside, was not seen before; a bar is progress when its count went up. tqdm redraws a bar
with a carriage return, so a captured log holds many redraws on one line: the last one counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_COUNTER = re.compile(r"(?<![\d.])(\d+)/(\d+)(?:\s*\[|\s*$)")
"""tqdm's `i/N` count, before its `[elapsed<left, rate]` (or at the end of a bare bar)."""
_PERCENT = re.compile(r"(?<![\d.])(\d{1,3})%")
_BAR = re.compile(r"\d{1,3}%\s*\|[^|]*\|")
"""tqdm's `NN%|████  |`: drawn from the count, so not part of what names the bar."""
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def shape(text: str) -> str:
    """The line with its numbers replaced and spaces collapsed: a heartbeat keeps its shape as its numbers move
    (its timestamp's included, so a log prefix of any form needs no parsing here)."""
    return _SPACE.sub(" ", _NUMBER.sub("#", text)).strip()


@dataclass
class ProgressTracker:
    """Feeds on a server's log lines, one at a time; says which of them show progress."""

    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    """A bar's label (its text before the count, numbers aside) -> the highest count it showed."""
    last_line: str | None = None
    """The last line that showed progress."""

    def feed(self, line: str) -> bool:
        """Whether `line` shows progress (remembered: the same line again does not)."""
        text = _last_redraw(line)
        if not text:
            return False
        counted = _COUNTER.search(text) or _PERCENT.search(text)
        if counted is not None:
            label = shape(_BAR.sub("", text[: counted.start()]))
            count = int(counted.group(1))
            moved = count > self.counts.get(label, -1)
            if moved:
                self.counts[label] = count
        else:
            key = shape(text)
            moved = key not in self.seen
            self.seen.add(key)
        if moved:
            self.last_line = line.strip()
        return moved


def _last_redraw(line: str) -> str:
    """The last non-empty carriage-return segment of a line (what a terminal would show)."""
    for segment in reversed(line.split("\r")):
        if segment.strip():
            return segment.strip()
    return ""
