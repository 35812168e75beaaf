"""Every statement of a failure in the evidence, as candidates for the root cause (pure).

Three sources, one shape: the lines a signature row matched (by words, or by an ERROR level); the
exception lines of tracebacks no row names beyond "a Python exception", placed in a family by their
structure (exception type, innermost frames; see knowledge/families.py); and nothing else. What the
server survived (survival.py) is no candidate, nor vLLM's caught failure to import its CUDA ops on a platform that
runs on its plugin's kernels (knowledge/platforms.py). A row's category and the traceback's family compete on
specificity: `KeyError: 'lm_head.weight'` raised in `load_weights` is a checkpoint problem, while
`CUDA out of memory` raised there is still out of memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.classify.phase import traceback_of
from orchestrator.classify.structure import Shape, shape_of
from orchestrator.classify.survival import (
    last_activity_line_no,
    ready_line_no,
    stop_line_no,
    survived,
    teardown_line_no,
)
from orchestrator.harvest.records import Evidence, Hit, LogLine, TracebackRecord
from orchestrator.knowledge.kinds import hedges, quotes_another
from orchestrator.knowledge.lines import parse, strip_ansi
from orchestrator.knowledge.markers import REQUEST_HANDLER
from orchestrator.knowledge.patterns import Signature
from orchestrator.knowledge.platforms import engine_ops_unneeded
from orchestrator.knowledge.signatures import BY_ID
from orchestrator.model import Category, Phase

_BARE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*:?$|^terminate called after throwing an instance of '[^']*'$")
"""An exception's name alone: Python's bare `AssertionError`, or C++'s terminate header, whose message is on the
`  what():  ...` line after it."""
_RAISE = re.compile(r"^raise\s+(?P<name>[A-Za-z_][\w.]*)(?:\(|\s*$)")
"""A `raise` statement is a traceback's code line, also where a paste lost its indentation: where the exception
it raises is in the log, that line states the failure and the statement is no candidate."""
PYTHON_EXCEPTION = BY_ID["python_exception"]
LOGGED_EXCEPTION_LEVEL_ROW = "error_statement"
"""The row of a line that states an error by its level alone (signatures.LEVEL_ROWS)."""
LOGGED_EXCEPTION_SPECIFICITY = 13
"""Above a line that is an error by its level alone (11) or a bare fatal statement (12), below every statement of a
death or a cause: a logger may also narrate (`Error executing method x`) before the traceback it prints."""
TRACEBACK_EXCEPTION_SPECIFICITY = PYTHON_EXCEPTION.specificity
INTERRUPTED_SPECIFICITY = BY_ID["stop_requested"].specificity - 1
"""A KeyboardInterrupt: below the statement of the stop that raised it, above what only says something died."""
RECOVERABLE = frozenset({Category.PYTHON_EXCEPTION_OTHER, Category.UNKNOWN, Category.TOKENIZER_OR_TEMPLATE_ERROR,
                         Category.INVALID_ARGUMENT, Category.UNSUPPORTED_CONFIG, Category.HANG_OR_TIMEOUT})
"""Failures a serving process can outlive: one request's exception, a bad request, a chat template error."""


@dataclass(frozen=True)
class Candidate:
    """One line that states a failure, with what it would mean as the root cause."""

    line: LogLine
    category: Category
    specificity: int
    rule: str
    """What decided the category: a signature id, or `family:<id>` for a traceback's structure."""
    generic: bool = False
    leads: bool = False
    """The line begins with the exception itself (`KeyError: ...`), not a wrapper or a code line."""
    phase: Phase | None = None
    """The phase the log was in at the line (its startup markers so far)."""
    implied: Phase | None = None
    """The phase the rule itself implies (an argparse error is arg_parse), used when the markers say nothing."""
    signature: Signature | None = None
    traceback: TracebackRecord | None = None
    shape: Shape | None = None

    @property
    def bare(self) -> bool:
        """The line is an exception's name alone (`AssertionError`, `ImportError:`): its meaning is elsewhere."""
        return _BARE.match(parse(strip_ansi(self.line.text)).body.strip()) is not None

    @property
    def quoting(self) -> bool:
        """The line reports a failure elsewhere by quoting it (a dead engine's error naming the original one)."""
        return quotes_another(parse(strip_ansi(self.line.text)).body.strip())

    @property
    def loose(self) -> bool:
        """The line names a failure outside any traceback of its own (a logger's summary of an exception)."""
        tb = self.traceback
        return tb is None or tb.exception_line is None or tb.exception_line.line_no != self.line.line_no

    @property
    def hedged(self) -> bool:
        """The line hedges what it reports (`returned 0, likely a timeout`)."""
        return hedges(parse(strip_ansi(self.line.text)).body)

    def rank(self) -> tuple[int, int, int, int, int, int]:
        """Sort key part: more specific first; among equals, a line that says something, then one that states the
        failure outright rather than hedging it, then first-hand rather than quoting it from another process, then
        the exception line itself rather than a wrapper or code line."""
        return (-self.specificity, int(self.bare), int(self.hedged), int(self.quoting), int(self.loose),
                -int(self.leads and not self.generic))


def candidates(evidence: Evidence) -> list[Candidate]:
    """Every failure statement the server did not survive."""
    ready = ready_line_no(evidence)
    activity = last_activity_line_no(evidence)
    stop = stop_line_no(evidence, ready)
    found: list[Candidate] = []
    covered: set[int] = set()
    follow_ups = {h.line.line_no for h in evidence.hits if h.signature in BY_ID and BY_ID[h.signature].generic}
    platform = evidence.resolved.get("platform")
    teardown = teardown_line_no(evidence)
    for hit in evidence.hits:
        cand = _from_hit(evidence, hit)
        if cand is None or _survived(cand, ready, activity, stop):
            continue
        if engine_ops_unneeded(parse(strip_ansi(hit.line.text)).body, platform):
            continue  # vLLM's CUDA ops, which a plugin platform (Neuron, TPU, Ascend) runs without: it went on past it
        if cand.signature is not None and cand.signature.by_signal and teardown is not None \
                and hit.line.line_no > teardown:
            covered.add(hit.line.line_no)  # the server's own teardown killed it: the exit -9 says no more than that
            continue
        tb = cand.traceback
        if hit.signature == "traceback" and tb is not None and tb.exception_line is not None \
                and tb.exception_line.line_no in follow_ups:
            continue  # the header of a traceback that ends in a follow-up says no more than the follow-up
        found.append(cand)
        if not cand.generic and cand.specificity >= TRACEBACK_EXCEPTION_SPECIFICITY:
            covered.add(hit.line.line_no)
    for tb in evidence.tracebacks:
        line = tb.exception_line
        if line is None or line.line_no in covered:
            continue
        cand = _from_traceback(tb, line)
        if line.line_no in follow_ups and cand.category is Category.PYTHON_EXCEPTION_OTHER:
            # `RuntimeError: Engine core initialization failed. See root cause above`: a follow-up raised as an
            # exception says no more than the follow-up's own row, which already stands for the line.
            continue
        if not _survived(cand, ready, activity, stop):
            found.append(cand)
    if found and _all_request_scoped(found):
        return []  # only requests failed, each answered with an error status by a server that went on
    return _without_raise_statements(found)


def _without_raise_statements(found: list[Candidate]) -> list[Candidate]:
    bodies = [parse(strip_ansi(c.line.text)).body.strip() for c in found]
    raised = [_RAISE.match(b) for b in bodies]
    stated = {b.split(":", 1)[0].rsplit(".", 1)[-1] for b, r in zip(bodies, raised, strict=True) if r is None}
    return [c for c, r in zip(found, raised, strict=True) if r is None or r["name"].rsplit(".", 1)[-1] not in stated]


def _request_scoped(cand: Candidate) -> bool:
    return cand.category in RECOVERABLE and not cand.generic and REQUEST_HANDLER.search(cand.line.text) is not None


def _all_request_scoped(found: list[Candidate]) -> bool:
    """Whether every failure is one request's: stated by a request handler, or the traceback such a handler's line
    introduces (uvicorn's `Exception in ASGI application`, then the request's traceback on the next lines)."""
    scoped = {c.line.line_no for c in found if _request_scoped(c)}
    if not scoped:
        return False
    return all(
        c.line.line_no in scoped
        or (c.category in RECOVERABLE and not c.generic and c.traceback is not None
            and (c.traceback.line_no in scoped or c.traceback.line_no - 1 in scoped))
        for c in found
    )


def _survived(cand: Candidate, ready: int | None, activity: int | None, stop: int | None) -> bool:
    # A statement that something died (a follow-up) is never outlived, whatever the lines after it show; except one
    # connection's end (a client that hung up, a cancelled request), which serving after it shows the server outlived.
    connection = cand.shape is not None and cand.shape.connection_scoped
    if cand.shape is not None and cand.shape.operator_stop and ready is not None and cand.line.line_no > ready:
        return True  # stopped by hand (Ctrl-C) once ready: the run ended, nothing failed
    recoverable = (cand.category in RECOVERABLE and not cand.generic) or connection
    return survived(cand.line.line_no, ready=ready, activity=activity, recoverable=recoverable, stop=stop)


def _from_hit(evidence: Evidence, hit: Hit) -> Candidate | None:
    sig = BY_ID.get(hit.signature)
    if sig is None:
        return None
    tb = traceback_of(evidence, hit)
    if sig.id == LOGGED_EXCEPTION_LEVEL_ROW:
        logged = _exception_logged_before(evidence, hit)
        if logged is not None:
            return logged
    if sig.context_regex is not None and (hit.traceback is None or tb is None or not sig.context_regex.search(tb.text)):
        return None
    shape = shape_of(tb) if tb is not None else None
    own = tb is not None and tb.exception_line is not None and tb.exception_line.line_no == hit.line.line_no
    category, specificity, rule, generic = sig.category, sig.specificity, sig.id, sig.generic
    if own and shape is not None:
        if shape.consequence and category is Category.PYTHON_EXCEPTION_OTHER:
            generic = True
        elif shape.family is not None and shape.family.specificity > specificity and not generic:
            category, specificity, rule = shape.family.category, shape.family.specificity, f"family:{shape.family.id}"
    return Candidate(hit.line, category, specificity, rule, generic, hit.leads, hit.phase, sig.phase, sig, tb, shape)


def _exception_logged_before(evidence: Evidence, hit: Hit) -> Candidate | None:
    """A logger's `exception(e)` prints the exception's message on one line and its traceback right after, under the
    same level: where the paste cut that traceback before its exception line, the message line is the exception."""
    cut = next((t for t in evidence.tracebacks if t.line_no == hit.line.line_no + 1 and t.exception_line is None
                and not t.truncated), None)
    if cut is None:
        return None
    shape = shape_of(cut)
    return Candidate(hit.line, Category.PYTHON_EXCEPTION_OTHER, LOGGED_EXCEPTION_SPECIFICITY, "logged_exception",
                     shape.consequence, True, hit.phase, None, None, cut, shape)


def _from_traceback(tb: TracebackRecord, line: LogLine) -> Candidate:
    shape = shape_of(tb)
    if shape.interrupted:
        # Ctrl-C, or a SIGTERM handler's `raise KeyboardInterrupt("terminated")` (vLLM's API server while it starts):
        # killed from outside, said less well than by the stop's own statement (a `stop` row), which it follows.
        return Candidate(line, Category.PROCESS_KILLED, INTERRUPTED_SPECIFICITY, "interrupted", True, True, tb.phase,
                         None, None, tb, shape)
    if shape.family is not None:
        family = shape.family
        return Candidate(line, family.category, family.specificity, f"family:{family.id}", False, True, tb.phase,
                         None, None, tb, shape)
    return Candidate(line, Category.PYTHON_EXCEPTION_OTHER, TRACEBACK_EXCEPTION_SPECIFICITY, "traceback_exception",
                     shape.consequence, True, tb.phase, None, None, tb, shape)
