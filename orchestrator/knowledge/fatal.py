"""The fatal-line rule: a line that says the server is going down. One rule, used live and offline.

A line is fatal when its message (prefix removed) is not indented (traceback code), not a warning,
not progress logged at INFO/DEBUG, not known noise (benign.py), and matches a row of the signature table that
states a failure: every row but the bare `Traceback (most recent call last):` header,
whose exception line follows anyway.
The readiness wait stops at the first fatal line; the evidence builder records the same line as the
log's first fatal one, and the classifier takes its causes from the same rows. The classifier also
counts evidence that cannot be judged from one line as it arrives (an exception no row names, an
ERROR-level statement): those need the lines after them to tell whether the server survived.
"""

from __future__ import annotations

from orchestrator.knowledge import kinds
from orchestrator.knowledge.benign import is_benign
from orchestrator.knowledge.lines import EXCEPTION_START_RE, parse, strip_ansi
from orchestrator.knowledge.patterns import Signature
from orchestrator.knowledge.signatures import NEEDLES as _SIGNATURE_NEEDLES
from orchestrator.knowledge.signatures import SIGNATURES

NEEDLES: tuple[str, ...] = _SIGNATURE_NEEDLES
"""A line holding none of these literals cannot be fatal."""

FATAL_ROWS: tuple[Signature, ...] = tuple(s for s in SIGNATURES if s.states_failure)


QUIET_LEVELS = frozenset({"INFO", "DEBUG"})
"""Lines logged at these levels are progress (`Cascade attention is not supported, disabling it`), unless
they begin with an exception (a launcher that re-logs the server's output at INFO re-logs its tracebacks too)
or state a failure that is one at any level (`Signature.any_level`): the level is one input, never a veto."""


def fatal_rows(
    message: str, *, warning: bool, indented: bool, level: str | None = None
) -> tuple[Signature, ...]:
    """The failure-stating rows a message matches (none for code lines, warnings, quiet levels and noise)."""
    rows = tuple(s for s in FATAL_ROWS if (s.on_warnings or not warning) and s.matches(message))
    return stated_failures(rows, message, indented=indented, level=level)


def stated_failures(
    rows: tuple[Signature, ...], message: str, *, indented: bool, level: str | None
) -> tuple[Signature, ...]:
    """Of the rows a message matched (warning rows already filtered), those that make its line fatal."""
    if not message or not rows or is_benign(message):
        return ()
    if not EXCEPTION_START_RE.match(message) and (indented or level in QUIET_LEVELS):
        # An indented line outside a traceback's code (the caller routes code lines elsewhere) is a message
        # wrapped or continued: only what is a failure at any level counts there. One that begins with an exception
        # (`  NotImplementedError: ...` in a log pasted indented as a whole) is that exception's own line.
        return tuple(s for s in rows if s.states_failure and s.any_level)
    return tuple(s for s in rows if s.states_failure)


def is_fatal_line(line: str) -> bool:
    """Whether a raw log line means the server is going down (the rule the readiness wait stops on)."""
    if not any(n in line for n in NEEDLES):
        return False
    p = parse(strip_ansi(line))
    message = p.body.strip()
    warning = kinds.is_warning(p, message)
    indented = p.body[:1] in (" ", "\t") and not message.startswith("what():")
    return bool(fatal_rows(message, warning=warning, indented=indented, level=p.level))
