"""Log bytes -> Evidence, streaming, in bounded memory (pure: the caller does the reading).

`EvidenceBuilder.feed(chunk)` takes raw bytes in any chunking; lines end at `\\n`, `\\r\\n` or a bare `\\r`
(tqdm redraws a progress bar with `\\r`, and a crash message can be glued to the last redraw). Only lines
holding one of the harvest's literals are decoded and parsed (see prefilter.py), except inside a traceback,
where every line counts. Everything kept is bounded: the first few lines of each signature, a fixed number
of distinct tracebacks, warnings and errors (repeats are counted), and the last lines of the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from orchestrator.harvest import autos
from orchestrator.harvest.prefilter import PREFILTER
from orchestrator.harvest.records import Evidence, Hit, LogLine, MarkerSeen
from orchestrator.harvest.tally import HitTally, MarkerTally, MessageTally
from orchestrator.harvest.tracebacks import OpenTraceback, TracebackAssembler
from orchestrator.knowledge import kinds
from orchestrator.knowledge.benign import is_benign
from orchestrator.knowledge.fatal import QUIET_LEVELS, stated_failures
from orchestrator.knowledge.lines import EXCEPTION_START_RE, Parsed, parse, strip_ansi, ts_key
from orchestrator.knowledge.markers import MarkerSpec, marker_of_line
from orchestrator.knowledge.patterns import Signature
from orchestrator.knowledge.rows_runtime import NAMED_PYTHON_ERRORS
from orchestrator.knowledge.signatures import BY_ID, LEVEL_ROWS, SIGNATURES
from orchestrator.model import Category, Phase
from orchestrator.secret import Masker

TRACEBACK_ROW = BY_ID["traceback"]

__all__ = ["Evidence", "EvidenceBuilder", "extract_evidence"]

MAX_CARRY = 1 << 20
"""A line longer than this (bytes, no line break) is cut and processed in pieces."""
MAX_LINE_CHARS = 32 << 10
HITS_PER_SIGNATURE = 5
TAIL_LINES = 20
_TAIL_BYTES = 16 << 10
_CACHE = 4096
_BATCH = 1 << 20
LONE_CONTINUATION_LINES = 3
"""How many lines after a lone exception line may continue its message."""


class EvidenceBuilder:
    """Accumulates evidence from a log fed in chunks or lines; `finish()` returns it."""

    def __init__(self, masker: Masker | None = None) -> None:
        # Every line that can reach the evidence passes the masker first: `api_key='...'` in
        # server_args, a secret-named assignment, and each secret value of the launch at hand.
        self._masker = masker or Masker()
        self._carry = b""
        self._newlines = 0
        self._bytes = 0
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._ts: str | None = None
        self._phase: Phase | None = None
        self._tbs = TracebackAssembler()
        self._markers: dict[str, MarkerTally] = {}
        self._last_marker: tuple[MarkerSpec, LogLine] | None = None
        self._hits: dict[str, list[HitTally]] = {}
        self._rows_cache: dict[str, tuple[Signature, ...]] = {}
        self._errors = MessageTally()
        self._cuda = MessageTally()
        self._warnings = MessageTally()
        self._deprecations = MessageTally()
        self._first_error: LogLine | None = None
        self._fatal: LogLine | None = None
        self._resolved: dict[str, str] = {}
        self._versions: dict[str, str] = {}
        self._server_args: dict[str, str] = {}
        self._votes = {"sglang": 0, "vllm": 0}
        self._lone: tuple[str, LogLine] | None = None
        """A lone exception line (no traceback, no prefix) whose message may go on over the next lines."""
        self._follow = 0
        self._head: tuple[str, int] | None = None
        """A level-prefixed line with no message (`ERROR ... [executor.py:149]`): its level, and how many more indented
        lines below it may carry its message."""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the log."""
        if not chunk:
            return
        self._bytes += len(chunk)
        buf = self._carry + chunk if self._carry else chunk
        nl = buf.rfind(b"\n")
        # A trailing \r may be the first half of \r\n: keep it for the next chunk.
        cr = buf.rfind(b"\r", nl + 1, len(buf) - 1)
        cut = max(nl, cr) + 1
        if cut == 0 and len(buf) > MAX_CARRY:
            cut = len(buf)
        if cut:
            self._scan(buf, cut)
        self._carry = buf[cut:]

    def feed_line(self, line: str | bytes, line_no: int | None = None) -> None:
        """Take one line (with or without its line break); `line_no` sets its number in the file."""
        data = line.encode("utf-8", "replace") if isinstance(line, str) else line
        if self._carry:
            self._flush()
        if line_no is not None:
            self._newlines = line_no - 1
        if (not self._tbs.active and self._follow <= 0 and b"\n" not in data and b"\r" not in data
                and not PREFILTER.interesting_bytes(data)):
            # The common case of the live feed: one dull line (not inside a traceback, not a lone exception's message
            # going on: _scan reads those whole too); count it and keep it for the tail only.
            self._bytes += len(data) + 1
            self._newlines += 1
            self._keep_tail(data + b"\n")
            return
        self.feed(data if data.endswith(b"\n") else data + b"\n")

    def finish(self) -> Evidence:
        """The evidence of everything fed so far."""
        self._flush()
        self._tbs.close_all()
        return self._evidence()

    def _flush(self) -> None:
        if self._carry:
            carry, self._carry = self._carry, b""
            self._scan(carry + b"\n", len(carry) + 1)

    def _scan(self, buf: bytes, end: int) -> None:
        """Process the complete lines in buf[:end]: only the interesting ones, or all inside a traceback."""
        self._keep_tail(buf[max(0, end - _TAIL_BYTES) : end])
        cursor = PREFILTER.cursor(buf, end)
        pos = counted = 0
        while pos < end:
            if self._tbs.active or self._follow > 0:
                start = pos
            else:
                hit = cursor.next_hit(pos)
                if hit < 0:
                    break
                start = max(buf.rfind(b"\n", pos, hit), pos - 1)
                start = max(start, buf.rfind(b"\r", start + 1, hit)) + 1
            stop = buf.find(b"\n", start, end)
            stop = end if stop < 0 else stop
            cr = buf.find(b"\r", start, stop)
            stop = stop if cr < 0 else cr
            self._newlines += buf.count(b"\n", counted, start)
            counted = start
            self._line(buf[start:stop].decode("utf-8", "replace"), self._newlines + 1)
            pos = stop + (2 if buf[stop : stop + 2] == b"\r\n" else 1)
        self._newlines += buf.count(b"\n", counted, end)

    def _keep_tail(self, piece: bytes) -> None:
        self._tail.append(piece)
        self._tail_size += len(piece)
        if self._tail_size > 2 * _TAIL_BYTES:
            kept = b"".join(self._tail)[-_TAIL_BYTES:]
            self._tail = deque([kept])
            self._tail_size = len(kept)

    def _tail_lines(self) -> list[str]:
        data = (b"".join(self._tail) + self._carry)[-_TAIL_BYTES:]
        if len(data) < self._bytes:
            data = data[data.find(b"\n") + 1 :]  # the first line is cut: drop it
        return [self._masker.text(t) for t in data.decode("utf-8", "replace").splitlines()[-TAIL_LINES:]]

    def _line(self, text: str, line_no: int) -> None:
        text = self._masker.text(text[:MAX_LINE_CHARS])
        clean = strip_ansi(text)
        p = parse(clean)
        if self._head is not None:
            p = self._under_head(p)
        if p.ts:
            self._ts = p.ts
        line = LogLine(text, line_no, p.ts or self._ts)
        self._vote(p, clean)
        spec = marker_of_line(clean)
        if spec is not None:
            self._marker(spec, line)
        tb = self._tbs.feed(p, line, self._phase)
        if self._tbs.role == "frame":
            autos.python_version(clean, self._versions)
            return
        if self._tbs.role == "code":
            # The innermost frame's source line is often the raise itself: `raise TimeoutError("Timed out ...")`.
            for row in self._rows(p.body.strip(), False):
                if not row.generic:
                    self._hit(row, line, False, tb)
            return
        message = p.body.strip()
        if self._continue_lone(p, message, tb, clean):
            return
        if not message:
            if p.level is not None and tb is None and not self._tbs.active:
                self._head, self._lone, self._follow = (p.level, LONE_CONTINUATION_LINES), None, 1
            return
        self._facts(message)
        continuing = self._tbs.role == "message"
        warning = kinds.is_warning(p, message, continuing=continuing)
        # Advice that goes on an exception's message (`Please install or update the <package> ...` after `RuntimeError:
        # <backend> is not available`) is the exception's: what it says is stated by the exception's line.
        advice = continuing and not warning and kinds.is_advice(message)
        rows = self._rows(message, warning)
        if warning:
            self._warnings.add(message, message, line)
        if kinds.is_deprecation(message) and not kinds.is_error(p, message):
            self._deprecations.add(message, message, line)
            if not warning:
                self._warnings.add(message, message, line)
        # Indented lines are code and continuations, except C++'s `  what():  <message>` of a thrown exception and
        # the indented lines that continue an exception's message.
        indented = p.body[:1] in (" ", "\t") and not message.startswith("what():") and self._tbs.role != "message"
        stated = stated_failures(rows, message, indented=indented, level=p.level)
        if stated and self._fatal is None:
            self._fatal = line
        if (not stated and not warning and not indented and p.level in kinds.ERROR_LEVELS and not is_benign(message)
                and TRACEBACK_ROW not in rows):
            stated = LEVEL_ROWS  # an error by its level alone; a traceback's header at ERROR says nothing yet
        if stated or (not warning and not indented and kinds.is_error(p, message) and p.level not in QUIET_LEVELS):
            self._error(message, line)
        cuda_key = kinds.cuda_error_key(message)
        if cuda_key is not None:
            self._cuda.add(cuda_key, message, line)
        leads = EXCEPTION_START_RE.match(message) is not None
        stating = tb.exception_line if advice and tb is not None and tb.exception_line is not None else None
        for row in stated:
            self._hit(row, stating or line, leads or stating is not None, tb)
        if TRACEBACK_ROW in rows:
            self._hit(TRACEBACK_ROW, line, False, tb)
        if leads and tb is None and not p.prefixed and not indented and not warning:
            self._lone, self._follow = (message, line), LONE_CONTINUATION_LINES

    def _under_head(self, p: Parsed) -> Parsed:
        """A line under a level prefix that had no message: a logger (or a paste of its output) that put the message on
        the lines below, indented. Those lines are the message, at the prefix's level, not code or a wrapped tail."""
        assert self._head is not None
        level, left = self._head
        self._head = None
        under = not p.prefixed and p.body[:1] in (" ", "\t") and bool(p.body.strip()) and not self._tbs.active
        if under and left > 1:
            self._head = (level, left - 1)
        else:
            self._follow = 0
        return replace(p, body=p.body.strip(), level=level) if under else p

    def _continue_lone(self, p: Parsed, message: str, tb: OpenTraceback | None, clean: str) -> bool:
        """An exception stated on its own (no traceback, no prefix) whose message a paste or a wrapping logger carried
        on over the next lines (`tvm.error.InternalError: Check failed: ...` then `must go through <the SM120 kernel>`):
        what the message says as a whole is said by the exception's line. True when the line was taken as such a
        continuation and needs nothing more."""
        if self._follow <= 0 or self._lone is None:
            return False
        self._follow -= 1
        lone_message, lone_line = self._lone
        if (tb is not None or p.prefixed or not message or p.body[:1] in (" ", "\t")
                or EXCEPTION_START_RE.match(message) or "Traceback (most recent call last)" in message):
            self._lone, self._follow = None, 0
            return False
        whole = f"{lone_message} {message}"
        self._lone = (whole, lone_line)
        # A line the harvest would have read anyway keeps what it says alone as its own statement (pydantic's `Value
        # error, ...` under its header); a line read only as the continuation adds all it says to the exception's.
        own = PREFILTER.interesting(clean)
        said = {s.id for s in self._rows(lone_message, False)}
        if own:
            said |= {s.id for s in self._rows(message, False)}
        for row in stated_failures(self._rows(whole, False), whole, indented=False, level=None):
            if row.id not in said and not row.generic:
                self._hit(row, lone_line, True, None)
        return not own

    def _facts(self, message: str) -> None:
        autos.apply(autos.RESOLVED, message, self._resolved)
        autos.apply(autos.VERSIONS, message, self._versions)
        if not self._server_args and message.startswith("server_args=ServerArgs("):
            self._server_args = autos.parse_server_args(message)

    def _rows(self, message: str, warning: bool) -> tuple[Signature, ...]:
        key = f"{int(warning)}{message}"
        rows = self._rows_cache.get(key)
        if rows is None:
            found = [s for s in SIGNATURES if (s.on_warnings or not warning) and s.matches(message)]
            if any(s.generic for s in found):
                # A follow-up raised as an exception is not also a plain Python exception; a Python error that its
                # own words name (`... failed to start: division by zero`) still is one.
                found = [s for s in found if s.generic or s.category is not Category.PYTHON_EXCEPTION_OTHER
                         or s.id in NAMED_PYTHON_ERRORS]
            rows = tuple(found)
            if len(self._rows_cache) >= _CACHE:
                self._rows_cache.clear()
            self._rows_cache[key] = rows
        return rows

    def _hit(self, row: Signature, line: LogLine, leads: bool, tb: OpenTraceback | None) -> None:
        accs = self._hits.setdefault(row.id, [])
        for acc in accs:
            if acc.line.text == line.text:
                acc.count += 1
                return
        if len(accs) < HITS_PER_SIGNATURE:
            accs.append(HitTally(line, self._phase, leads, tb))

    def _error(self, message: str, line: LogLine) -> None:
        self._errors.add(message, message, line)
        first = self._first_error
        if first is None or (ts_key(line.ts), line.line_no) < (ts_key(first.ts), first.line_no):
            self._first_error = line

    def _marker(self, spec: MarkerSpec, line: LogLine) -> None:
        # The furthest phase any rank reached: with TP > 1 a slower rank prints earlier markers later.
        if self._phase is None or spec.phase.order >= self._phase.order:
            self._phase = spec.phase
            self._last_marker = (spec, line)
        seen = self._markers.get(spec.name)
        if seen is None:
            self._markers[spec.name] = MarkerTally(spec, line)
        else:
            seen.count += 1

    def _vote(self, p: Parsed, clean: str) -> None:
        if p.style:
            self._votes[p.style] += 1
        low = clean.lower()
        if "vllm" in low:
            self._votes["vllm"] += 1
        if "sglang" in low or "fired up and ready" in low:
            self._votes["sglang"] += 1

    def _evidence(self) -> Evidence:
        markers = [MarkerSeen(m.spec.name, m.spec.phase, m.line, m.count) for m in self._markers.values()]
        last = None
        if self._last_marker is not None:
            spec, line = self._last_marker
            last = MarkerSeen(spec.name, spec.phase, line, self._markers[spec.name].count)
        hits = [
            Hit(sig_id, acc.line, acc.phase, acc.count, acc.tb.index if acc.tb else None, acc.leads)
            for sig_id, accs in self._hits.items()
            for acc in accs
        ]
        hits.sort(key=lambda h: h.line.line_no)
        votes = self._votes
        engine = max(votes, key=lambda k: votes[k]) if any(votes.values()) else None
        tail = self._tail_lines()
        return Evidence(
            lines=self._newlines,
            bytes=self._bytes,
            engine=engine,
            markers=markers,
            last_marker=last,
            tracebacks=list(self._tbs.done),
            tracebacks_dropped=self._tbs.dropped,
            first_error=self._first_error,
            fatal=self._fatal,
            errors=self._errors.counted(),
            cuda_errors=self._cuda.counted(),
            warnings=self._warnings.counted(),
            deprecations=self._deprecations.counted(),
            resolved=dict(self._resolved),
            versions=dict(self._versions),
            server_args=dict(self._server_args),
            hits=hits,
            tail=tail,
        )


def extract_evidence(lines: Iterable[str | bytes]) -> Evidence:
    """Evidence from an iterable of lines (str or bytes, with or without line breaks)."""
    builder = EvidenceBuilder()
    batch: list[bytes] = []
    size = 0
    for item in lines:
        data = item.encode("utf-8", "replace") if isinstance(item, str) else item
        if not data.endswith(b"\n"):
            data += b"\n"
        batch.append(data)
        size += len(data)
        if size >= _BATCH:
            builder.feed(b"".join(batch))
            batch, size = [], 0
    builder.feed(b"".join(batch))
    return builder.finish()
