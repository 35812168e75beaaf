"""Verdicts reached without a server log: the host or the orchestrator failed, preflight rejected the cell,
the sweep skipped it, or the GPUs it needs are held. Named here so the category is decided in classify alone."""

from __future__ import annotations

from orchestrator.model import Category, Phase, Status, Verdict


def infra_verdict(exc: BaseException, phase: Phase | None = None) -> Verdict:
    """The verdict of an attempt the orchestrator or the host failed, not SGLang."""
    return Verdict(Status.INFRA, phase, Category.UNKNOWN, None, reason=f"{type(exc).__name__}: {exc}")


def rejected_verdict(reason: str) -> Verdict:
    """A cell preflight rejected (a flag or value the host's SGLang does not accept)."""
    return Verdict(Status.INVALID, Phase.PREFLIGHT, Category.INVALID_ARGUMENT, None, reason=reason)


def skipped_verdict(reason: str) -> Verdict:
    """A cell the sweep did not launch, for the reason given."""
    return Verdict(Status.SKIPPED, None, Category.UNKNOWN, None, reason)


def gpus_unavailable_verdict(reason: str) -> Verdict:
    """A cell that cannot start: the GPUs it needs are held by processes that are not this sweep's."""
    return Verdict(Status.INFRA, Phase.PREFLIGHT, Category.GPU_MEMORY_IN_USE, None, reason=reason)


def known_bad_verdict(reason: str, proven: Verdict) -> Verdict:
    """A cell not launched because a past run proved it cannot work here: skipped, with the proven category.

    The root-cause line stays with the proving run (its id is in the reason), so the table shows the reason.
    """
    return Verdict(Status.SKIPPED, proven.phase, proven.category, None, reason)
