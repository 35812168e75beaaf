"""A traceback's structure: its exception type, its frames innermost first, and the family they place it in."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.harvest.records import TracebackRecord
from orchestrator.knowledge.families import Family, families_of
from orchestrator.knowledge.lines import FRAME_RE, parse, strip_ansi

_TYPE = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?=:|\s*$|\()")

CONSEQUENCES = re.compile(
    r"(?:^|\.)(?:EOFError|BrokenPipeError|ConnectionResetError|ConnectionAbortedError|KeyboardInterrupt|SystemExit"
    r"|ChildProcessError|CancelledError|ActorDiedError|RayActorError|WorkerCrashedError|ActorUnavailableError"
    r"|ProcessExitedException|EngineDeadError|EngineGenerateError)$"
)
"""Exceptions that say another process already died or this one was told to stop: follow-ups, never a cause."""
CONNECTION_SCOPED = re.compile(
    r"(?:^|\.)(?:BrokenPipeError|ConnectionResetError|ConnectionAbortedError|CancelledError)$"
)
"""Of those, the ones a single connection or request ends with (a client that hung up, a cancelled request's task):
a server that goes on serving after one outlived it."""
OPERATOR_STOP = re.compile(r"(?:^|\.)(?:KeyboardInterrupt|SystemExit)$")
"""A stop someone asked for (Ctrl-C, an exit): after the server was ready, the end of a run, not a failure."""
INTERRUPT = re.compile(r"(?:^|\.)KeyboardInterrupt$")
"""Of those, the interrupt: Ctrl-C, or a signal handler's (vLLM raises it on SIGTERM while it starts); a SystemExit may
also be a program ending itself on an error."""


@dataclass(frozen=True)
class Shape:
    """What a traceback's structure says: the exception type, the frames (innermost first), the family."""

    exception_type: str | None
    frames: tuple[str, ...]
    family: Family | None

    @property
    def innermost(self) -> str | None:
        """The innermost frame (`File "x.py", line 3, in f`), None when the excerpt shows no frame."""
        return self.frames[0] if self.frames else None

    @property
    def consequence(self) -> bool:
        """Whether the exception only reports a death elsewhere (a broken pipe, a dead actor)."""
        return self.exception_type is not None and CONSEQUENCES.search(self.exception_type) is not None

    @property
    def operator_stop(self) -> bool:
        """Whether the exception is a stop someone asked for (Ctrl-C, an exit)."""
        return self.exception_type is not None and OPERATOR_STOP.search(self.exception_type) is not None

    @property
    def interrupted(self) -> bool:
        """Whether the exception is an interrupt (Ctrl-C, a signal handler's)."""
        return self.exception_type is not None and INTERRUPT.search(self.exception_type) is not None

    @property
    def connection_scoped(self) -> bool:
        """Whether the exception ends one connection or request only (a client gone, a cancelled task)."""
        return self.exception_type is not None and CONNECTION_SCOPED.search(self.exception_type) is not None


def exception_type(exception: str | None) -> str | None:
    """The qualified type of an exception line (`torch.OutOfMemoryError` of `torch.OutOfMemoryError: ...`)."""
    if not exception:
        return None
    m = _TYPE.match(exception.strip())
    return m.group(1) if m else None


def shape_of(tb: TracebackRecord) -> Shape:
    """The structure of one traceback."""
    frames = tuple(parse(strip_ansi(line)).body.strip() for line in reversed(tb.lines) if FRAME_RE.search(line))
    etype = exception_type(tb.exception)
    found = families_of(etype, list(frames))
    return Shape(etype, frames, found[0] if found else None)
