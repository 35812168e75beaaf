"""Pure checks on answer text: the known answer of a greedy probe, and whether sampled text is plausible.

A server can answer every request with status 200 and still be broken: NaN logits or a wrong
kernel make the model emit one token over and over (often `!`, token id 0 in many
vocabularies), unprintable bytes, or `nan`-like words. Sampled text cannot be compared with an
expected answer, so it is judged by shape: each check returns why the text is wrong, or None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.probe.wire import excerpt

MAX_UNPRINTABLE_SHARE = 0.1
MIN_DISTINCT_WORD_SHARE = 0.25
"""Below this share of distinct words (in 16 words or more) the text is a loop."""
ARTEFACT_WORDS = frozenset({"nan", "-nan", "inf", "-inf", "<unk>", "<pad>", "<|endoftext|>"})

_WHOLE_TEXT_REPEATS = re.compile(r"(.{1,8}?)\1{3,}", re.DOTALL)
# Markdown rules and ellipses legitimately repeat one character, so they are left out.
_LONG_RUN = re.compile(r"([^\s\-=_*#~.])\1{15,}")


def known_answer_problem(text: str, expect_any: Sequence[str]) -> str | None:
    """Why `text` fails the known-answer check (none of `expect_any` in it, any case), or None."""
    if not expect_any:
        return implausibility(text)
    folded = text.casefold()
    if any(word.casefold() in folded for word in expect_any):
        return None
    return f"expected one of {list(expect_any)} in the answer, got {excerpt(text, 80)!r}"


def implausibility(text: str) -> str | None:
    """Why `text` does not look like model-written text, or None when it does."""
    compact = "".join(text.split())
    if not compact:
        return "empty answer"
    unprintable = sum(1 for ch in compact if not ch.isprintable() or ch == "\ufffd")
    if unprintable > MAX_UNPRINTABLE_SHARE * len(compact):
        return f"{unprintable} of {len(compact)} characters are unprintable"
    if len(compact) >= 8 and _WHOLE_TEXT_REPEATS.fullmatch(compact):
        return f"one short unit repeated throughout: {excerpt(compact, 24)!r}"
    run = _LONG_RUN.search(compact)
    if run:
        return f"a run of {len(run.group(0))} identical characters {run.group(1)!r}"
    words = text.casefold().split()
    artefacts = sum(1 for word in words if word.strip(".,;:!?\"'") in ARTEFACT_WORDS)
    if artefacts and artefacts * 3 >= len(words):
        return f"{artefacts} of {len(words)} words are NaN-like artefacts"
    if len(words) >= 16 and len(set(words)) < MIN_DISTINCT_WORD_SHARE * len(words):
        return f"only {len(set(words))} distinct words in {len(words)}: a loop"
    return None
