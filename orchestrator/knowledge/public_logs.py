"""Labelled public server logs, as shipped evidence, and how near a new failure is to each of them.

The labelled logs of the project's sets (public SGLang and vLLM issues: the shared fixtures and
tests/data/real-logs/) are shipped as package data, `data/public_logs.json`, written by
`scripts/eval-classify --ship-evidence`: for each log only its evidence, never the log itself (the exception
type, the cause line normalised, the innermost frames), with its source, title, category and our note. A
failure is compared with them on those words: the words of the cause line, the exception's type and the
innermost frames' functions and files, each weighted by how rare it is among the shipped logs (a word every
log has says nothing), as the cosine of the two weighted sets. No network: the data ships with the tool.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data") / "public_logs.json"
THRESHOLD = 0.25
"""A shipped log at least this near (cosine of the weighted words, 0..1) is shown as similar: chosen on the fitting
part of scripts/eval-classify --split, the lowest that keeps every neighbour shown right there (108 of its 152
failing logs are shown one, whose category is the log's in all of them; at 0.2, 116 and 97%)."""
SHOWN = 3
FRAMES = 3
"""Innermost frames compared."""

_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+(?:\.\d+)?")
_PATH = re.compile(r"(?:[\w.\-]*/)+([\w.\-]+)")
_FRAME = re.compile(r'File "(?:[^"]*[/\\])?([^"/\\]+)", line \d+, in (\S+)')
_STOP = frozenset((
    "the", "and", "for", "with", "not", "was", "were", "this", "that", "from", "are", "has", "have", "had", "been",
    "but", "its", "into", "than", "then", "there", "which", "while", "when", "will", "can", "could", "should",
    "would", "may", "might", "see", "above", "below", "error", "exception", "line", "file", "most", "recent", "call",
    "last", "traceback", "none", "true", "false", "self",
))
"""Words every failure says: they tell no failure from another."""


def normalise(message: str) -> str:
    """A cause line as shipped and compared: numbers and addresses masked, paths cut to their file name."""
    text = _PATH.sub(r"\1", message.strip())
    return _NUMBERS.sub("#", text)[:300]


def words(cause: str, exception_type: str | None, frames: list[str]) -> frozenset[str]:
    """The words a failure is compared on: of its cause line, its exception's type, its innermost frames."""
    found = {w for w in _WORD.findall(cause.lower()) if w not in _STOP}
    if exception_type:
        found.add("type:" + exception_type.rsplit(".", 1)[-1].lower())
    for frame in frames[:FRAMES]:
        m = _FRAME.search(frame)
        if m:
            found |= {"file:" + m.group(1).lower(), "in:" + m.group(2).lower()}
    return frozenset(found)


def fingerprint(tail: list[str]) -> str:
    """What tells one log from any other: its last three non-empty lines, hashed (to not offer a log itself)."""
    last = [t for t in tail if t.strip()][-3:]
    return format(zlib.crc32("\n".join(last).encode("utf-8", "replace")), "08x")


@dataclass(frozen=True)
class PublicLog:
    """One shipped log: where it was posted, what it was, and the evidence it is compared on."""

    source: str
    title: str
    category: str
    note: str
    words: frozenset[str]
    fingerprint: str
    also_ok: tuple[str, ...] = ()

    def agrees(self, category: str) -> bool:
        """Whether this log's label is `category` or accepts it as equally right."""
        return category == self.category or category in self.also_ok


@dataclass(frozen=True)
class Near:
    """A shipped log near a failure, and how near (0..1)."""

    log: PublicLog
    score: float

    def to_dict(self) -> dict[str, Any]:
        """The `similar` entry of `classify --json`."""
        log = self.log
        return {"source": log.source, "title": log.title, "category": log.category, "score": round(self.score, 2),
                "note": log.note}


class Corpus:
    """The shipped logs with each word's weight (inverse document frequency)."""

    def __init__(self, logs: list[PublicLog]) -> None:
        self.logs = logs
        df = Counter(w for log in logs for w in log.words)
        n = len(logs) or 1
        self.idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}
        self._unseen = math.log((n + 1) / 0.5)
        self._norms = [self._norm(log.words) for log in logs]

    def _weight(self, word: str) -> float:
        return self.idf.get(word, self._unseen)

    def _norm(self, ws: frozenset[str]) -> float:
        return math.sqrt(sum(self._weight(w) ** 2 for w in ws)) or 1.0

    def nearest(
        self, ws: frozenset[str], *, own: str | None = None, threshold: float = THRESHOLD, category: str | None = None
    ) -> list[Near]:
        """The shipped logs at least `threshold` near these words, nearest first; never a log whose fingerprint
        is `own`, nor any other log of that log's source; with `category`, only logs that agree with it."""
        if not ws:
            return []
        mine = own and {log.source for log in self.logs if log.fingerprint == own}
        norm = self._norm(ws)
        found = []
        for log, other in zip(self.logs, self._norms, strict=True):
            if (mine and log.source in mine) or (category is not None and not log.agrees(category)):
                continue
            shared = ws & log.words
            if not shared:
                continue
            score = min(1.0, sum(self._weight(w) ** 2 for w in shared) / (norm * other))
            if score >= threshold:
                found.append(Near(log, score))
        found.sort(key=lambda n: -n.score)
        return found[:SHOWN]


def from_json(doc: dict[str, Any]) -> PublicLog:
    """A shipped log from its JSON record."""
    return PublicLog(
        doc["source"], doc.get("title", ""), doc["category"], doc.get("note", ""),
        words(doc.get("cause", ""), doc.get("exception_type"), list(doc.get("frames", []))),
        doc.get("fingerprint", ""), tuple(doc.get("also_ok", [])),
    )


@cache
def corpus() -> Corpus:
    """The shipped logs (read once; none when the data file is missing)."""
    try:
        docs = json.loads(DATA.read_text(encoding="utf-8"))
    except FileNotFoundError:
        docs = []
    return Corpus([from_json(d) for d in docs])
