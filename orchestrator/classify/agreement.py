"""Answers that disagree across cells: greedy answers compared over the passing cells of one sweep. Pure.

Greedy decoding is deterministic, and every flag combination of a sweep serves the same model, so
the passing cells should give the same greedy answer to the same prompt. A cell whose answer reads
well (it passed its own checks) but differs from what most cells answered is wrong: a kernel that
computes something else without crashing (DESIGN.md category `wrong_output`). The known answer,
where the probe has one, outranks the majority: an answer holding it is never called wrong.

Answers are compared on their first words (casefolded, punctuation dropped): different kernels may
legitimately round differently late in a long answer, while a wrong fact or number shows at once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from orchestrator.model import Category, Phase, Status, Verdict

COMPARED_WORDS = 12
"""How many leading words of an answer decide agreement."""
MIN_MAJORITY = 3
"""Fewer agreeing cells than this are no majority: two against one proves nothing."""
RULE = "answer_agreement"

_WORD = re.compile(r"[\w.+-]+")


@dataclass(frozen=True)
class GreedyAnswer:
    """One passing cell's greedy answer."""

    run_id: str
    cell_id: str
    label: str
    prompt: str
    text: str
    verdict: Verdict
    expect_any: tuple[str, ...] = ()
    """The probe's known answer (any of these words), empty when the prompt has none."""


@dataclass(frozen=True)
class Revision:
    """A passing run whose answer the comparison shows wrong, and its new verdict."""

    run_id: str
    cell_id: str
    verdict: Verdict


def answer_key(text: str) -> tuple[str, ...]:
    """What agreement compares: the first COMPARED_WORDS words, casefolded, without surrounding punctuation."""
    words = (w.strip(".,;:!?\"'()[]") for w in _WORD.findall(text.casefold()))
    return tuple(w for w in words if w)[:COMPARED_WORDS]


def _holds_known(text: str, expect_any: Sequence[str]) -> bool:
    folded = text.casefold()
    return any(word.casefold() in folded for word in expect_any)


def disagreeing(answers: Sequence[GreedyAnswer]) -> list[Revision]:
    """The answers that disagree with a clear majority of the others to the same prompt, as failed verdicts."""
    revisions: list[Revision] = []
    by_prompt: dict[str, list[GreedyAnswer]] = {}
    for answer in answers:
        by_prompt.setdefault(answer.prompt, []).append(answer)
    for group in by_prompt.values():
        keys = [answer_key(a.text) for a in group]
        counts = Counter(k for k in keys if k)
        if not counts:
            continue
        majority, size = counts.most_common(1)[0]
        if size < MIN_MAJORITY or size * 2 <= len(group):
            continue
        agreeing = next(a for a, k in zip(group, keys, strict=True) if k == majority)
        for answer, key in zip(group, keys, strict=True):
            if key == majority or (answer.expect_any and _holds_known(answer.text, answer.expect_any)):
                continue
            if answer.expect_any and not _holds_known(agreeing.text, answer.expect_any):
                continue  # the majority misses the known answer too: it cannot be the yardstick
            revisions.append(Revision(answer.run_id, answer.cell_id, _wrong(answer, agreeing, size, len(group))))
    return revisions


def _wrong(answer: GreedyAnswer, agreeing: GreedyAnswer, size: int, total: int) -> Verdict:
    reason = (
        f"greedy answer disagrees with {size} of {total} passing cells: got {answer.text.strip()!r}, "
        f"most cells answered {agreeing.text.strip()!r}"
    )
    if answer.expect_any:
        reason += f" (known answer: any of {list(answer.expect_any)})"
    evidence = {
        "rule": RULE,
        "prompt": answer.prompt,
        "answer": answer.text,
        "majority_answer": agreeing.text,
        "majority_cells": size,
        "cells_compared": total,
        "known_answer": list(answer.expect_any),
        "previous_verdict": answer.verdict.to_dict(),
    }
    return replace(
        answer.verdict,
        status=Status.FAIL,
        phase=Phase.GREEDY_DECODE,
        category=Category.WRONG_OUTPUT,
        root_cause_line=None,
        reason=reason,
        failed_probe="greedy",
        evidence=evidence,
    )
