"""Finding the few lines worth parsing in a huge log, fast.

A 1 GB log is mostly `Decode batch.` and access-log lines. Python's `re` runs an alternation of a hundred
literals at a few dozen MB/s, but scans quickly for a pattern whose first character is rare. So each
literal is cut to start at one of its rare characters (upper case, punctuation, x/z/j), the one least
seen in the lines that fill huge logs (a line containing the literal contains that suffix too), and the
suffixes form one trie-shaped regex. A few all-lower-case literals (`LOWER`: `error`, `deprecat`, ...)
are searched with `bytes.find`, one fast pass each. Any other all-lower-case literal (a signature's
`stream is capturing`) is left to the lines' other literals: the messages that carry it also say `Error`
or `CUDA` (tests check every signature's example gets through).
"""

from __future__ import annotations

import re
from collections import Counter

from orchestrator.harvest.needles import NEEDLES

LOWER: tuple[str, ...] = (
    "error", "fail", "fatal", "timeout", "timed out", "deprecat", "signal", "version", "assert", "init engine",
    "cannot find -l", "only support",
)
"""The lower-case literals worth one pass over the whole log each. `only support`: a kernel's guard against the wrong
architecture prints its refusal from device code, bare, before the trap it raises (`This kernel only supports sm100`,
CUTLASS's and FlashMLA's invalid control path), and nothing else on the line is a literal."""

_TYPICAL = Counter(
    "[2025-12-29 09:20:03 TP3] Decode batch. #running-req: 36, #token: 14473, token usage: 0.03, cuda graph: True, "
    "gen throughput (token/s): 2283.73, #queue-req: 0\n"
    "[2025-12-29 09:20:03 TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 128, token usage: 0.03, "
    "#running-req: 35, #queue-req: 0\n"
    '[2025-12-29 09:20:03] INFO:     127.0.0.1:40123 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    "INFO 07-07 20:12:44 metrics.py:295] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 "
    "tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%."
)
"""Character counts of the lines that fill huge logs: an anchor should start with a character they lack."""

_Trie = dict[str, "_Trie"]
_RARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZxzj_\"'`=!<>{}|~^$%&*+;@\\")
_MIN_ANCHOR = 3


def anchors_of(needles: tuple[str, ...]) -> list[str]:
    """Each needle cut to start at its rare character least seen in typical lines (needles without one dropped)."""
    anchors: set[str] = set()
    for needle in needles:
        cuts = [i for i, ch in enumerate(needle) if ch in _RARE and len(needle) - i >= min(_MIN_ANCHOR, len(needle))]
        if cuts:
            cut = min(cuts, key=lambda i: (_TYPICAL[needle[i]], i))
            anchors.add(needle[cut:])
    return sorted(anchors)


def trie_pattern(words: list[str]) -> str:
    """A regex matching any of `words`, shaped as a trie so alternatives fail on their first character."""
    trie: _Trie = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: _Trie) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        if "" in node:
            return "(?:" + "|".join(branches) + ")?"
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


class Prefilter:
    """Answers "where is the next line worth a look" over a byte buffer, and "is this line worth a look"."""

    def __init__(self, needles: tuple[str, ...], lower: tuple[str, ...] = LOWER) -> None:
        self.anchors = anchors_of(needles)
        self.lower = lower
        pattern = trie_pattern(self.anchors)
        self._bytes_re = re.compile(pattern.encode())
        self._str_re = re.compile(pattern)
        self._lower_b = tuple(n.encode() for n in lower)

    def interesting(self, line: str) -> bool:
        """Whether one line contains any needle."""
        return self._str_re.search(line) is not None or any(n in line for n in self.lower)

    def interesting_bytes(self, line: bytes) -> bool:
        """Whether one raw line contains any needle."""
        for needle in self._lower_b:
            if needle in line:
                return True
        return self._bytes_re.search(line) is not None

    def cursor(self, buf: bytes, end: int) -> Cursor:
        """A scanner over `buf[:end]` that returns needle positions in increasing order."""
        return Cursor(self, buf, end)


class Cursor:
    """Keeps each needle's next position in one buffer, so every needle scans the buffer once."""

    def __init__(self, prefilter: Prefilter, buf: bytes, end: int) -> None:
        self._re = prefilter._bytes_re
        self._needles = prefilter._lower_b
        self._buf = buf
        self._end = end
        self._next = [buf.find(n, 0, end) for n in self._needles]
        m = self._re.search(buf, 0, end)
        self._re_next = m.start() if m else -1

    def next_hit(self, pos: int) -> int:
        """The position of the first needle at or after `pos`, or -1."""
        buf, end = self._buf, self._end
        if 0 <= self._re_next < pos:
            m = self._re.search(buf, pos, end)
            self._re_next = m.start() if m else -1
        best = self._re_next
        nxt = self._next
        for i, at in enumerate(nxt):
            if 0 <= at < pos:
                at = nxt[i] = buf.find(self._needles[i], pos, end)
            if at >= 0 and (best < 0 or at < best):
                best = at
        return best


PREFILTER = Prefilter(NEEDLES)
