"""The shape of one failure signature: what a log line must say, what it means, and how much it says."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.model import Category, Phase

FAILURE_SPECIFICITY = 10
"""Rows above this state a failure; below it only the traceback header, which a failing line follows."""


@dataclass(frozen=True)
class Signature:
    """One row of the signature table.

    `specificity` ranks causes: when several rows match a log, the highest wins (ties: earliest line).
    `needles` are literals of which every matching line contains at least one; they keep the regex off the
    bulk of a huge log. `context`, when set, must match the traceback the line ends (its frames and code).
    `generic` marks follow-ups (sigquit, engine failed to start) that never beat a cause; a line that is one
    is not also counted as a plain Python exception (`RuntimeError: Engine core initialization failed`).
    `in_warnings` lets the row match on lines logged as warnings (a NaN detector logs at WARNING).
    `any_level` makes the row a failure at any level, INFO and warnings included: a statement of CUDA running out
    of memory, of NCCL failing or of a kill is one whoever logs it and at whatever level (a hosting platform
    re-logging the server's output at INFO, NCCL's `WARN` lines); survival still applies.
    `vocabulary`, when set, must also hold for the message (it names a server argument, say).
    `wraps` marks a statement that something else failed first (`Initialization failed. warmup error`, a router
    giving up): it names the category only when no other failure is stated above it.
    `stop` marks a statement that the process was asked to stop from outside (a signal it received, a job cancelled):
    before the server was ready it is the kill; once the server was ready, the end of the run, and what is logged
    from there on is shutdown noise, not a cause (classify/survival.py).
    `teardown` marks the server killing its own processes after one failed (SGLang's `kill_process_tree`, its SIGQUIT
    handler); `by_signal` marks a kill stated only by its signal or exit status (-9, 137, SIGKILL): after a teardown
    that is the teardown's own kill, not one from outside (classify/candidates.py).
    """

    id: str
    category: Category
    specificity: int
    pattern: str
    needles: tuple[str, ...]
    phase: Phase | None = None
    context: str | None = None
    generic: bool = False
    in_warnings: bool = False
    example: str = ""
    any_level: bool = False
    vocabulary: Callable[[str], bool] | None = None
    wraps: bool = False
    stop: bool = False
    teardown: bool = False
    by_signal: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    context_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))
        object.__setattr__(self, "context_regex", re.compile(self.context) if self.context else None)

    @property
    def states_failure(self) -> bool:
        """Whether a line matching this row says something failed (all but the bare traceback header)."""
        return self.generic or self.specificity > FAILURE_SPECIFICITY

    def matches(self, message: str) -> bool:
        """Whether a line's message (prefix stripped) carries this signature."""
        return (
            any(n in message for n in self.needles)
            and self.regex.search(message) is not None
            and (self.vocabulary is None or self.vocabulary(message))
        )

    @property
    def on_warnings(self) -> bool:
        """Whether the row also matches lines logged as warnings."""
        return self.in_warnings or self.any_level


def sig(
    id: str,
    category: Category,
    specificity: int,
    pattern: str,
    needles: tuple[str, ...] | str,
    *,
    phase: Phase | None = None,
    context: str | None = None,
    generic: bool = False,
    in_warnings: bool = False,
    example: str = "",
    any_level: bool = False,
    vocabulary: Callable[[str], bool] | None = None,
    wraps: bool = False,
    stop: bool = False,
    teardown: bool = False,
    by_signal: bool = False,
) -> Signature:
    """A table row (a needle may be given as one string)."""
    return Signature(
        id,
        category,
        specificity,
        pattern,
        (needles,) if isinstance(needles, str) else needles,
        phase,
        context,
        generic,
        in_warnings,
        example,
        any_level,
        vocabulary,
        wraps,
        stop,
        teardown,
        by_signal,
    )
