"""Pure: whether a failed attempt is tried again, decided once from its failure's class and the matrix's policy.

A relaunch of a 400B model costs minutes of GPU time, so it must be able to change the answer:
- deterministic: the build or the checkpoint rejects the configuration (a flag, a kernel missing for the
  GPU, an import, the weights, the tokenizer, a KV cache too small for the flags): the same again;
- transient: the host or the orchestrator failed (infra), or someone else held the port or the GPUs, or
  killed the server from outside: worth another try once the GPUs are free;
- flaky: everything else that fails (NaN, illegal memory access, a hang, an OOM under load, wrong answers):
  retried to measure how often it happens (k of N).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.model import Category, Status, Verdict
from orchestrator.settings import RetryClass, RetryPolicy

DETERMINISTIC = frozenset({
    Category.INVALID_ARGUMENT, Category.UNSUPPORTED_CONFIG, Category.KERNEL_NOT_SUPPORTED_ON_ARCH,
    Category.IMPORT_ERROR, Category.WEIGHTS_LOAD_ERROR, Category.TOKENIZER_OR_TEMPLATE_ERROR,
    Category.KV_CACHE_TOO_SMALL,
})  # fmt: skip
TRANSIENT = frozenset({Category.PORT_IN_USE, Category.GPU_MEMORY_IN_USE, Category.PROCESS_KILLED})
_WHY = {
    "deterministic": "a relaunch cannot change it",
    "transient": "the host or another process, not the flags",
    "flaky": "it may not happen every time",
}


def retry_class(verdict: Verdict) -> RetryClass | None:
    """The class of a failure (None: a verdict that is not a failure: pass, invalid, skipped)."""
    if verdict.status is Status.INFRA:
        return "transient"
    if verdict.status is not Status.FAIL:
        return None
    if verdict.category in DETERMINISTIC:
        return "deterministic"
    if verdict.category in TRANSIENT:
        return "transient"
    return "flaky"


@dataclass(frozen=True)
class RetryDecision:
    """Whether the attempt after this one is launched, and the sentence the table gives for it."""

    again: bool
    reason: str
    saved: int = 0
    """Launches `retries:` alone would have spent on this cell that the class policy saves."""


def decide(verdict: Verdict, attempt: int, policy: RetryPolicy, default: int) -> RetryDecision:
    """After attempt number `attempt` ended with `verdict`: launch the cell again?"""
    kind = retry_class(verdict)
    if kind is None:
        return RetryDecision(False, "")
    allowed = policy.retries(kind, default)
    if verdict.category is Category.PORT_IN_USE:
        allowed = max(1, allowed)  # a port race is the orchestrator's: always worth a launch on another port
    name = verdict.category.value if verdict.status is Status.FAIL else "infra"
    if attempt <= allowed:
        return RetryDecision(True, f"retried: {name} is {kind} ({_WHY[kind]}; retry {kind}: {allowed})")
    if allowed == 0:
        # Counted for what cannot change: a flaky class set to 0 is the user's choice, not a launch saved.
        saved = default if attempt == 1 and kind == "deterministic" else 0
        return RetryDecision(False, f"not retried: {name} is {kind} ({_WHY[kind]}; retry {kind}: 0)", saved)
    return RetryDecision(False, f"{kind}: its {allowed} retr{'y' if allowed == 1 else 'ies'} used")


def retries_owed(last: Verdict, attempts: int, policy: RetryPolicy, default: int) -> bool:
    """Whether a cell whose last of `attempts` attempts ended with `last` still owes one (a resume asks)."""
    return decide(last, attempts, policy, default).again


def retry_reason(verdicts: Sequence[Verdict], policy: RetryPolicy, default: int) -> str:
    """Why a cell with these attempts' verdicts (in order) was or was not tried again: the table's sentence."""
    if not verdicts:
        return ""
    last = verdicts[-1]
    if retry_class(last) is None:
        if len(verdicts) > 1 and retry_class(verdicts[-2]) is not None:
            return f"{last.status.value} on attempt {len(verdicts)}; " + decide(
                verdicts[-2], len(verdicts) - 1, policy, default
            ).reason
        return ""
    return decide(last, len(verdicts), policy, default).reason


HARDWARE_FAULT = re.compile(
    r"\bXid\b|uncorrectable ECC|ECC error|fallen off the bus|fell off the bus|GPU is lost|"
    r"NVRM:|GPU has fallen|Unable to determine the device handle",
    re.IGNORECASE,
)
"""What a GPU that is failing says (a driver Xid, ECC errors, a GPU lost from the bus): not the flags' doing."""


def hardware_fault(texts: Iterable[str | None]) -> str | None:
    """The first line among `texts` that says the GPU hardware failed, if any."""
    for text in texts:
        for line in (text or "").splitlines():
            if HARDWARE_FAULT.search(line):
                return line.strip()
    return None


DISK_FULL = re.compile(r"No space left on device|\[Errno 28\]|ENOSPC|Disk quota exceeded", re.IGNORECASE)
"""The host's disk filled up (the log, a cache, the checkpoint's copy): not the flags' doing."""


GPU_FAILED = "the host's GPU failed, not the flags"


def host_failure(verdict: Verdict, said: Iterable[str] = ()) -> str | None:
    """Why a failed run is the host's or the orchestrator's and not the cell's (then it is `infra`), if it is.

    A GPU that states a hardware fault (in the verdict's lines or any error line the run `said`); a disk that
    filled; a port the orchestrator picked that another process bound first (SGLang binds only after loading its
    weights, so a free port can be taken meanwhile).
    """
    if verdict.status is not Status.FAIL:
        return None
    texts = [verdict.root_cause_line, verdict.reason]
    fault = hardware_fault([*texts, *said])
    if fault is not None:
        return f"{GPU_FAILED} ({fault})"
    full = next((line for t in texts for line in (t or "").splitlines() if DISK_FULL.search(line)), None)
    if full is not None:
        return f"the host's disk is full ({full.strip()})"
    if verdict.category is Category.PORT_IN_USE:
        return "the port picked for it was bound by another process before the server could bind it; another is"
    return None


def gpu_fault(verdict: Verdict) -> str | None:
    """The hardware fault a run was made `infra` for (host_failure's), if it was: its host is suspect."""
    if verdict.status is not Status.INFRA:
        return None
    found = re.match(rf"{re.escape(GPU_FAILED)} \((.+?)\)(?:: |$)", verdict.reason)
    return found.group(1) if found else None
