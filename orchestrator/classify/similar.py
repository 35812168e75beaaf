"""The shipped public logs nearest to a failure (knowledge/public_logs.py): "looks like sgl-project/sglang#N".

A failing verdict is compared on its root-cause line's words, its exception's type and its innermost frames,
read from the evidence the same way the shipped evidence was (scripts/eval-classify --ship-evidence). A log
that is itself one of the shipped logs is never offered its own source: its last lines identify it. A verdict
that names a cause is shown public logs of that cause only; a catch-all one, the nearest of any.
"""

from __future__ import annotations

from orchestrator.classify.structure import exception_type, shape_of
from orchestrator.harvest.records import Evidence, TracebackRecord
from orchestrator.knowledge.lines import EXCEPTION_START_RE, parse, strip_ansi
from orchestrator.knowledge.public_logs import Near, corpus, fingerprint, normalise, words
from orchestrator.model import Category, Status, Verdict

CATCH_ALL = frozenset({Category.PYTHON_EXCEPTION_OTHER, Category.UNKNOWN})
CONTRADICTING_THRESHOLD = 0.6
"""How near a public log of a named cause must be to be offered beside a catch-all verdict."""


def traceback_at(evidence: Evidence, line: str) -> TracebackRecord | None:
    """The traceback whose exception line (else any line) is `line`."""
    found = next((t for t in evidence.tracebacks if t.exception_line and t.exception_line.text == line), None)
    return found or next((t for t in evidence.tracebacks if line in t.lines), None)


def cause_of(evidence: Evidence, line: str) -> tuple[str, str | None, list[str]]:
    """What a root-cause line is compared on: its message normalised, the exception type, the innermost frames."""
    message = parse(strip_ansi(line)).body.strip() or line.strip()
    tb = traceback_at(evidence, line)
    if tb is not None and tb.exception_line is not None and tb.exception_line.text == line:
        shape = shape_of(tb)
        return normalise(message), shape.exception_type, list(shape.frames)
    etype = exception_type(message) if EXCEPTION_START_RE.match(message) else None
    return normalise(message), etype, []


def similar_to(evidence: Evidence, verdict: Verdict) -> list[Near]:
    """The shipped logs near a failing verdict, nearest first (none for a pass or a verdict with no line)."""
    if verdict.status is Status.PASS or not verdict.root_cause_line:
        return []
    cause, etype, frames = cause_of(evidence, verdict.root_cause_line)
    # A named cause is shown beside public logs of the same cause only: a neighbour that names another would
    # contradict the verdict. A catch-all verdict takes the nearest of any category.
    category = None if verdict.category in CATCH_ALL else verdict.category.value
    near = corpus().nearest(words(cause, etype, frames), own=fingerprint(evidence.tail), category=category)
    if category is None:
        # A neighbour that names a cause the rules did not find contradicts the verdict: it is offered only when it
        # is a close match, one of the verdict's own catch-all kind at the usual threshold.
        near = [n for n in near if n.log.category == verdict.category.value or n.score >= CONTRADICTING_THRESHOLD]
    return near
