"""The evidence one log yields, as plain data that turns into JSON and back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.model import Phase


def _phase(value: Any) -> Phase | None:
    return Phase(value) if value else None


@dataclass(frozen=True)
class LogLine:
    """A line of the log, verbatim (decoded, without its line break), with where and when it was printed."""

    text: str
    line_no: int
    ts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"text": self.text, "line_no": self.line_no, "ts": self.ts}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LogLine:
        """Rebuild from `to_dict` output."""
        return cls(data["text"], int(data["line_no"]), data.get("ts"))


@dataclass(frozen=True)
class Counted:
    """A distinct message (prefix removed), how often it was printed, and where it first was."""

    text: str
    count: int
    first_seen: str | None
    line_no: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"text": self.text, "count": self.count, "first_seen": self.first_seen, "line_no": self.line_no}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Counted:
        """Rebuild from `to_dict` output."""
        return cls(data["text"], int(data["count"]), data.get("first_seen"), int(data["line_no"]))


@dataclass(frozen=True)
class MarkerSeen:
    """A startup marker the log reached: its first line and how many lines carried it."""

    name: str
    phase: Phase
    line: LogLine
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"name": self.name, "phase": self.phase.value, "count": self.count, **self.line.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarkerSeen:
        """Rebuild from `to_dict` output."""
        return cls(data["name"], Phase(data["phase"]), LogLine.from_dict(data), int(data.get("count", 1)))


@dataclass(frozen=True)
class TracebackRecord:
    """One Python traceback, verbatim (long ones keep head and tail), with its exception line."""

    lines: tuple[str, ...]
    exception: str | None
    """The exception line without its log prefix (`KeyError: 'x'`), None when the log cuts it off."""
    exception_line: LogLine | None
    line_no: int
    last_line_no: int
    ts: str | None
    truncated: bool
    """The log starts (or the paste starts) in the middle of it: no `Traceback (most recent call last):`."""
    omitted: int = 0
    count: int = 1
    """How many identical tracebacks (one per TP rank, say) were printed."""
    phase: Phase | None = None
    chained: bool = False
    """Printed after `The above exception was the direct cause ...` / `During handling ...`: an outer one."""

    @property
    def text(self) -> str:
        """The traceback as printed."""
        return "\n".join(self.lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "lines": list(self.lines),
            "exception": self.exception,
            "exception_line": self.exception_line.to_dict() if self.exception_line else None,
            "line_no": self.line_no,
            "last_line_no": self.last_line_no,
            "ts": self.ts,
            "truncated": self.truncated,
            "omitted": self.omitted,
            "count": self.count,
            "phase": self.phase.value if self.phase else None,
            "chained": self.chained,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TracebackRecord:
        """Rebuild from `to_dict` output."""
        exc = data.get("exception_line")
        return cls(
            lines=tuple(data["lines"]),
            exception=data.get("exception"),
            exception_line=LogLine.from_dict(exc) if exc else None,
            line_no=int(data["line_no"]),
            last_line_no=int(data["last_line_no"]),
            ts=data.get("ts"),
            truncated=bool(data["truncated"]),
            omitted=int(data.get("omitted", 0)),
            count=int(data.get("count", 1)),
            phase=_phase(data.get("phase")),
            chained=bool(data.get("chained", False)),
        )


@dataclass(frozen=True)
class Hit:
    """A line that carries a failure signature."""

    signature: str
    line: LogLine
    phase: Phase | None
    """The furthest startup phase the markers printed before the line reached (None before any)."""
    count: int = 1
    traceback: int | None = None
    """Index into Evidence.tracebacks of the traceback the line is part of."""
    leads: bool = False
    """The message starts with the exception (`ValueError: ...`) rather than quoting it mid-sentence."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "signature": self.signature,
            **self.line.to_dict(),
            "phase": self.phase.value if self.phase else None,
            "count": self.count,
            "traceback": self.traceback,
            "leads": self.leads,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hit:
        """Rebuild from `to_dict` output."""
        tb = data.get("traceback")
        return cls(
            data["signature"],
            LogLine.from_dict(data),
            _phase(data.get("phase")),
            int(data.get("count", 1)),
            None if tb is None else int(tb),
            bool(data.get("leads", False)),
        )


@dataclass
class Evidence:
    """Everything the classifier and the reports use from one log."""

    lines: int = 0
    bytes: int = 0
    engine: str | None = None
    """`sglang` or `vllm`, from the log's own line prefixes and paths."""
    markers: list[MarkerSeen] = field(default_factory=list)
    last_marker: MarkerSeen | None = None
    """The last line that reached the furthest phase (a lagging rank's earlier markers do not count)."""
    tracebacks: list[TracebackRecord] = field(default_factory=list)
    tracebacks_dropped: int = 0
    first_error: LogLine | None = None
    """The earliest error line by timestamp (file order among equal or missing timestamps)."""
    fatal: LogLine | None = None
    """The first line that means the server was going down."""
    errors: list[Counted] = field(default_factory=list)
    cuda_errors: list[Counted] = field(default_factory=list)
    warnings: list[Counted] = field(default_factory=list)
    deprecations: list[Counted] = field(default_factory=list)
    resolved: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    server_args: dict[str, str] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def marker(self, name: str) -> MarkerSeen | None:
        """The first occurrence of a marker, if the log reached it."""
        return next((m for m in self.markers if m.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "lines": self.lines,
            "bytes": self.bytes,
            "engine": self.engine,
            "markers": [m.to_dict() for m in self.markers],
            "last_marker": self.last_marker.to_dict() if self.last_marker else None,
            "tracebacks": [t.to_dict() for t in self.tracebacks],
            "tracebacks_dropped": self.tracebacks_dropped,
            "first_error": self.first_error.to_dict() if self.first_error else None,
            "fatal": self.fatal.to_dict() if self.fatal else None,
            "errors": [c.to_dict() for c in self.errors],
            "cuda_errors": [c.to_dict() for c in self.cuda_errors],
            "warnings": [c.to_dict() for c in self.warnings],
            "deprecations": [c.to_dict() for c in self.deprecations],
            "resolved": dict(self.resolved),
            "versions": dict(self.versions),
            "server_args": dict(self.server_args),
            "hits": [h.to_dict() for h in self.hits],
            "tail": list(self.tail),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        """Rebuild from `to_dict` output."""
        last, first, fatal = data.get("last_marker"), data.get("first_error"), data.get("fatal")
        return cls(
            lines=int(data.get("lines", 0)),
            bytes=int(data.get("bytes", 0)),
            engine=data.get("engine"),
            markers=[MarkerSeen.from_dict(m) for m in data.get("markers", [])],
            last_marker=MarkerSeen.from_dict(last) if last else None,
            tracebacks=[TracebackRecord.from_dict(t) for t in data.get("tracebacks", [])],
            tracebacks_dropped=int(data.get("tracebacks_dropped", 0)),
            first_error=LogLine.from_dict(first) if first else None,
            fatal=LogLine.from_dict(fatal) if fatal else None,
            errors=[Counted.from_dict(c) for c in data.get("errors", [])],
            cuda_errors=[Counted.from_dict(c) for c in data.get("cuda_errors", [])],
            warnings=[Counted.from_dict(c) for c in data.get("warnings", [])],
            deprecations=[Counted.from_dict(c) for c in data.get("deprecations", [])],
            resolved=dict(data.get("resolved", {})),
            versions=dict(data.get("versions", {})),
            server_args=dict(data.get("server_args", {})),
            hits=[Hit.from_dict(h) for h in data.get("hits", [])],
            tail=list(data.get("tail", [])),
        )
