"""Putting Python tracebacks back together from log lines, including interleaved and cut-off ones.

A traceback starts at `Traceback (most recent call last):` (possibly at the end of a log message:
`Scheduler hit an exception: Traceback ...`), or at a frame line when the log or a paste starts inside
one. Its frames and code lines follow; the first line that is neither ends the frames and is the exception
line if it looks like one. vLLM and Ray prefix every line with the writing process, so lines route to the
traceback of their process; SGLang writes a traceback as one multi-line message, so unprefixed lines go
to the most recent traceback. After an unprefixed exception line, a few more unprefixed lines continue
its message (`Possible solutions: ...`, ninja's output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from orchestrator.harvest.records import LogLine, TracebackRecord
from orchestrator.knowledge.lines import FRAME_RE, Parsed, looks_like_exception
from orchestrator.model import Phase

MAX_TRACEBACKS = 32
MAX_LINES = 200
HEAD_LINES = 12
MAX_LINE_CHARS = 2000
MAX_OPEN = 16
TAIL_LINES = 8
FLAT_CODE_LINES = 4
"""A flat traceback's code lines after one frame, at most: the statement (Python 3.13 shows a multi-line one whole)
and its `~~~^^^` markers."""

_HEADER = "Traceback (most recent call last)"
_DIGIT = re.compile(r"\d")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


@dataclass
class OpenTraceback:
    """A traceback still being read."""

    key: str
    first: LogLine
    truncated: bool
    phase: Phase | None
    lines: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    exception: str | None = None
    exception_line: LogLine | None = None
    last_line_no: int = 0
    omitted: int = 0
    tail_left: int = 0
    chained: bool = False
    """It follows a chain line (`The above exception was the direct cause ...`): an outer exception."""
    index: int | None = None
    """Its place in the finished list once closed (None: dropped over the bound, or still open)."""
    lead: str = ""
    """What stood before the header (or the first frame) that no prefix rule took away (a pod's name, a tab, a
    viewer's tag), as its shape (digits as 0): lines that start with the same shape carry it too."""
    indent: int = 0
    """The header's own indentation after that lead: deeper lines are frames and code, a line at it is the message."""
    flat: bool = False
    """Its first frame stood at the header's own indentation: a paste that lost the indentation, where code lines are
    told from the message by what they are (after a frame, not an exception's statement), not by their depth."""
    code_run: int = 0
    """How many code lines followed the last frame (a flat traceback's code of one frame is a few lines at most)."""

    def add(self, line: LogLine) -> None:
        """Append a line, keeping the head and the tail of a very long traceback."""
        self.last_line_no = line.line_no
        self.lines.append(line.text[:MAX_LINE_CHARS])
        if len(self.lines) > MAX_LINES:
            del self.lines[HEAD_LINES]
            self.omitted += 1


class TracebackAssembler:
    """Feeds on parsed lines; finished tracebacks are deduplicated and kept up to a bound."""

    def __init__(self) -> None:
        self.done: list[TracebackRecord] = []
        self.dropped = 0
        self._open: dict[str, OpenTraceback] = {}
        self._recent: str | None = None
        self._index: dict[tuple[str | None, tuple[str, ...]], int] = {}
        self.role = ""
        """What the last fed line was to its traceback: `frame`, `code`, `message` (a line continuing the
        exception's message, such as pydantic's indented `  Value error, ...`) or empty."""
        self._chain_pending = False

    @property
    def active(self) -> bool:
        """Whether a traceback is being read (then every line matters, not only the interesting ones)."""
        return bool(self._open)

    def feed(self, p: Parsed, line: LogLine, phase: Phase | None) -> OpenTraceback | None:
        """Take a line; returns the traceback it belongs to, or None. Frame and code lines set `role`."""
        self.role = ""
        body = p.body
        tb = self._route(p.key)
        if _HEADER in body:
            if tb is not None:
                self.close(tb)
            chained, self._chain_pending = self._chain_pending, False
            started = self._start(p.key, line, phase, truncated=False)
            started.chained = chained
            started.lead, started.indent = _lead(body[: body.find(_HEADER)])
            return started
        if tb is not None and not tb.lead and not tb.frames and tb.exception is None:
            tb.lead = _lead(body[: max(0, body.find('File "'))])[0] if FRAME_RE.search(body) else ""
        if tb is not None and tb.lead and _shape(body[: len(tb.lead)]) == tb.lead:
            body = body[len(tb.lead) :]
        if body.lstrip().startswith(_CHAINED):
            self._chain_pending = True
        elif body.strip() and tb is None:
            self._chain_pending = False
        is_frame = FRAME_RE.search(body) is not None
        if tb is None:
            if is_frame:
                tb = self._start(p.key, line, phase, truncated=True)
                tb.frames.append(body.strip())
                at = body.find('File "')
                # Without the header, a frame's own indentation says nothing sure about the message's (pastes nest
                # and re-indent excerpts): only the lead is learnt here.
                tb.lead = _lead(body[:at] if at >= 0 else "")[0]
                self.role = "frame"
                return tb
            return None
        if tb.exception is None:
            if is_frame:
                if not tb.frames and not tb.truncated and _indent(body) <= tb.indent:
                    tb.flat = True
                tb.add(line)
                tb.frames.append(body.strip())
                tb.code_run = 0
                self.role = "frame"
                return tb
            if body.strip() and (_indent(body) > tb.indent or _flat_code(tb, body)):
                tb.add(line)
                tb.code_run += 1
                self.role = "code"
                return tb
            if body.strip() and not body.startswith(_CHAINED) and looks_like_exception(body.strip()):
                tb.add(line)
                tb.exception, tb.exception_line = body.strip(), line
                tb.tail_left = 0 if p.prefixed else TAIL_LINES
                if tb.tail_left == 0:
                    self.close(tb)
                return tb
        elif tb.tail_left > 0 and not p.prefixed and body.strip() and not is_frame and not body.startswith(_CHAINED):
            tb.add(line)
            self.role = "message"
            tb.tail_left -= 1
            if tb.tail_left == 0:
                self.close(tb)
            return tb
        self.close(tb)
        return self.feed(p, line, phase)

    def close(self, tb: OpenTraceback) -> None:
        """Finish a traceback: merge it with an identical one or keep it (up to the bound)."""
        self._open.pop(tb.key, None)
        key = (tb.exception, tuple(tb.frames))
        index = self._index.get(key)
        if index is not None:
            rec = self.done[index]
            self.done[index] = TracebackRecord(
                rec.lines, rec.exception, rec.exception_line, rec.line_no, rec.last_line_no, rec.ts,
                rec.truncated, rec.omitted, rec.count + 1, rec.phase, rec.chained,
            )
        elif len(self.done) < MAX_TRACEBACKS:
            index = self._index[key] = len(self.done)
            self.done.append(
                TracebackRecord(
                    tuple(tb.lines), tb.exception, tb.exception_line, tb.first.line_no, tb.last_line_no, tb.first.ts,
                    tb.truncated, tb.omitted, 1, tb.phase, tb.chained,
                )
            )
        else:
            self.dropped += 1
        tb.index = index

    def close_all(self) -> None:
        """The log ended: finish whatever is open."""
        for tb in list(self._open.values()):
            self.close(tb)

    def _route(self, key: str) -> OpenTraceback | None:
        if key:
            return self._open.get(key)
        if "" in self._open:
            return self._open[""]
        return self._open.get(self._recent) if self._recent is not None else None

    def _start(self, key: str, line: LogLine, phase: Phase | None, *, truncated: bool) -> OpenTraceback:
        if key not in self._open and len(self._open) >= MAX_OPEN:
            self.close(next(iter(self._open.values())))
        tb = OpenTraceback(key, line, truncated, phase)
        tb.add(line)
        self._open[key] = tb
        self._recent = key
        return tb


def _flat_code(tb: OpenTraceback, body: str) -> bool:
    """Whether a line at the header's indentation is a flat traceback's code line: it follows a frame (or that frame's
    code), and it is no exception's statement, no chain line and no new header."""
    text = body.strip()
    return (tb.flat and bool(tb.frames) and tb.code_run < FLAT_CODE_LINES and not looks_like_exception(text)
            and not text.startswith(_CHAINED) and _HEADER not in text)


def _lead(before: str) -> tuple[str, int]:
    """What stands before a traceback's header or first frame: (the lead's shape, the indentation after it)."""
    core = before.rstrip(" \t")
    if not core:
        return "", _indent(before)
    return _shape(before[: len(core) + 1]), len(before) - len(core) - 1


def _shape(text: str) -> str:
    return _DIGIT.sub("0", text)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))
