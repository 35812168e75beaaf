"""Pure: whether a failed attempt is tried again, decided once from its failure's class and the matrix's policy.

A relaunch of a 400B model costs minutes of GPU time, so it must be able to change the answer:
- deterministic: the build or the checkpoint rejects the configuration (a flag, a kernel missing for the
  GPU, an import, the weights, the tokenizer, a KV cache too small for the flags): the same again;
- transient: the host or the orchestrator failed (infra), or someone else held the port or the GPUs, or
  killed the server from outside: worth another try once the GPUs are free;
- flaky: everything else that fails (NaN, illegal memory access, a hang, an OOM under load, wrong answers):
  retried to measure how often it happens (k of N).

A port race (the port the orchestrator picked was bound by another process before the server could bind it) is
the orchestrator's own failure, not the cell's: it is relaunched on another port without using up the cell's
retries, at most PORT_RACE_RELAUNCHES times per cell. Every other attempt counts against the retries of the class
its failure falls in, infra ones included: a host that loses SSH or fills its disk is given `retry transient:`
launches, no more. One pure rule, `decide_after`, reads a cell's attempts in order; the scheduler asks it after
each attempt and `--resume` (`retries_owed`) and the table (`retry_reason`, `needs_run`) ask it of the attempts in
the store, so an interrupted sweep resumes to the table an uninterrupted one gives.
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
    """After attempt number `attempt` (port races not counted: see `decide_after`) ended with `verdict`: launch the
    cell again?"""
    kind = retry_class(verdict)
    if kind is None:
        return RetryDecision(False, "")
    allowed = policy.retries(kind, default)
    name = verdict.category.value if verdict.status is Status.FAIL else "infra"
    if attempt <= allowed:
        return RetryDecision(True, f"retried: {name} is {kind} ({_WHY[kind]}; retry {kind}: {allowed})")
    if allowed == 0:
        # Counted for what cannot change: a flaky class set to 0 is the user's choice, not a launch saved.
        saved = default if attempt == 1 and kind == "deterministic" else 0
        return RetryDecision(False, f"not retried: {name} is {kind} ({_WHY[kind]}; retry {kind}: 0)", saved)
    return RetryDecision(False, f"{kind}: its {allowed} retr{'y' if allowed == 1 else 'ies'} used")


PORT_RACE_RELAUNCHES = 3
"""Launches on another port a cell gets after port races, beyond its retries. A race is rare (the survey saw the
port free; another process bound it in the seconds or minutes before the server did), so a race that recurs on one
cell means something on the host takes ports the survey cannot see, and each further launch of a large model
costs minutes to lose the same way: three bounds that waste while riding out a busy moment."""


def port_race(verdict: Verdict) -> bool:
    """Whether the attempt lost the port the orchestrator picked for it (the orchestrator's failure, not the cell's)."""
    return verdict.category is Category.PORT_IN_USE and verdict.status in (Status.FAIL, Status.INFRA)


def decide_after(verdicts: Sequence[Verdict], policy: RetryPolicy, default: int) -> RetryDecision:
    """After a cell's attempts ended with `verdicts` (in order): launch it again?

    A port race is relaunched on another port without counting as an attempt (PORT_RACE_RELAUNCHES per cell at
    most); once a cell both passed and failed, its k of N is measured and it is not launched again.
    """
    if not verdicts:
        return RetryDecision(True, "")
    last = verdicts[-1]
    races = sum(map(port_race, verdicts))
    if port_race(last):
        if races <= PORT_RACE_RELAUNCHES:
            return RetryDecision(True, (
                f"relaunched on another port: attempt {len(verdicts)} lost its port to another process (port race "
                f"{races} of at most {PORT_RACE_RELAUNCHES}; the orchestrator's, not counted as a retry)"
            ))  # fmt: skip
        return RetryDecision(False, (
            f"not relaunched: {races} port races, more than the {PORT_RACE_RELAUNCHES} relaunches a cell gets; "
            "something on the host takes the ports the orchestrator finds free"
        ))  # fmt: skip
    statuses = {v.status for v in verdicts}
    if Status.PASS in statuses and Status.FAIL in statuses and retry_class(last) is not None:
        return RetryDecision(False, "not retried: it passed and failed, its k of N is measured")
    return decide(last, len(verdicts) - races, policy, default)


def retries_owed(verdicts: Sequence[Verdict], policy: RetryPolicy, default: int) -> bool:
    """Whether a cell whose attempts ended with `verdicts` (in order) still owes one (a resume asks; none: it does)."""
    return decide_after(verdicts, policy, default).again


def retry_reason(verdicts: Sequence[Verdict], policy: RetryPolicy, default: int) -> str:
    """Why a cell with these attempts' verdicts (in order) was or was not tried again: the table's sentence."""
    if not verdicts:
        return ""
    last = verdicts[-1]
    if retry_class(last) is None:
        if len(verdicts) > 1 and retry_class(verdicts[-2]) is not None:
            earlier = verdicts[:-1]
            note = "" if port_race(earlier[-1]) else _races_note(earlier)  # a race's own sentence names it
            why = decide_after(earlier, policy, default).reason
            return f"{last.status.value} on attempt {len(verdicts)}; {why}{note}"
        return ""
    reason = decide_after(verdicts, policy, default).reason
    if port_race(last):
        return reason
    if last.status is Status.INFRA and any(v.status is not Status.INFRA for v in verdicts):
        # The row shows the latest verdict that proves something; say why this attempt is not it.
        reason = f"attempt {len(verdicts)} ended infra, which proves nothing about the flags; {reason}"
    return reason + _races_note(verdicts)


def _races_note(verdicts: Sequence[Verdict]) -> str:
    lost = [str(i) for i, v in enumerate(verdicts, 1) if port_race(v)]
    if not lost:
        return ""
    which = f"attempt{'s' if len(lost) > 1 else ''} {', '.join(lost)}"
    ports = "their ports" if len(lost) > 1 else "its port"
    return f" ({which} lost {ports} to another process: relaunched, not counted)"


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
