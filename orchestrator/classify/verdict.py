"""Evidence (+ what the probes saw) -> Verdict: status, phase, category and the line that says why (pure).

The root cause is the hit of the most specific signature; among equals, the line that starts with the
exception, then the earliest by time. A hit the server survived (it printed its ready marker afterwards)
is not a cause. Three rules refine the verdict beyond the table, two by what the log says and one by what the
batch scheduler says:
- CUDA out of memory while another process holds most of the GPU is `gpu_memory_in_use`. Offline the
  pids mean nothing, so the rule reads the amounts PyTorch prints: another process ("Process N has X GiB
  memory in use") holding more than half again this process's share ("this process has Y GiB", else what
  PyTorch allocated and reserved), or, when this process's share is not printed, any other holder while
  the weights were not yet loaded.
- An error that names nothing more specific (a Python exception, a segfault, a follow-up) during CUDA-graph
  capture is `cuda_graph_capture_failed`: current SGLang wraps every capture error that way itself.
- A launch its batch scheduler ended (the outcome's `scheduler_end`: Slurm's TIMEOUT, PREEMPTED, ...) is
  `process_killed` whatever the log says, the cluster's (`infra`) unless the job ran out of its memory.
Apart from the category, a failure of the host or the orchestrator (a failing GPU, a full disk, a port race:
retries.host_failure) makes the status `infra`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.classify.candidates import Candidate, candidates
from orchestrator.classify.phase import frame_phase
from orchestrator.classify.similar import similar_to
from orchestrator.classify.survival import ready_line_no, teardown_line_no
from orchestrator.harvest.records import Evidence, LogLine
from orchestrator.knowledge.lines import parse, strip_ansi, ts_key
from orchestrator.knowledge.markers import UVICORN_MARKER
from orchestrator.knowledge.patterns import Signature
from orchestrator.model import Category, Phase, ProbeOutcome, ProbeResult, SchedulerEnd, Status, Verdict
from orchestrator.retries import host_failure

_OTHER_HOLDER = re.compile(r"Process \d+ has ([\d.]+) ([KMGT]i?B) memory in use")
_THIS_PROCESS = re.compile(r"this process has ([\d.]+) ([KMGT]i?B) memory in use")
_PYTORCH_OWN = re.compile(r"Of the allocated memory ([\d.]+) ([KMGT]i?B) is allocated by PyTorch")
_RESERVED = re.compile(r"([\d.]+) ([KMGT]i?B) is reserved by PyTorch but unallocated")
_UNIT = {"K": 1 / (1 << 20), "M": 1 / 1024, "G": 1.0, "T": 1024.0}
_VAGUE = frozenset({Category.UNKNOWN, Category.PYTHON_EXCEPTION_OTHER})
_KILLED_CODES = frozenset({-9, 137})
CLOSE_CALL = 15
"""A runner-up within this many specificity points of the winner is reported as a close call."""

LABELS: dict[Category, str] = {
    Category.INVALID_ARGUMENT: "rejected argument",
    Category.UNSUPPORTED_CONFIG: "unsupported configuration",
    Category.IMPORT_ERROR: "import error",
    Category.CUDA_OOM: "CUDA out of memory",
    Category.KV_CACHE_TOO_SMALL: "KV cache too small",
    Category.CUDA_DEVICE_ASSERT: "CUDA device-side assert",
    Category.NAN_IN_PROBS: "NaN/inf in sampling probabilities",
    Category.ILLEGAL_MEMORY_ACCESS: "illegal memory access",
    Category.NCCL_ERROR: "NCCL / distributed error",
    Category.CUDA_GRAPH_CAPTURE_FAILED: "CUDA graph capture failed",
    Category.KERNEL_NOT_SUPPORTED_ON_ARCH: "kernel not supported on this GPU",
    Category.WEIGHTS_LOAD_ERROR: "weights failed to load",
    Category.HANG_OR_TIMEOUT: "hang or timeout",
    Category.TOKENIZER_OR_TEMPLATE_ERROR: "tokenizer or chat template error",
    Category.PORT_IN_USE: "port in use",
    Category.PROCESS_KILLED: "process killed",
    Category.KERNEL_JIT_ERROR: "JIT kernel build failed",
    Category.GPU_MEMORY_IN_USE: "GPU memory held by another process",
    Category.WARMUP_REQUEST_FAILED: "server warm-up request failed",
    Category.WRONG_OUTPUT: "wrong output",
    Category.PYTHON_EXCEPTION_OTHER: "Python exception",
    Category.UNKNOWN: "failed without a stated cause",
    Category.HEALTHY: "healthy",
}


@dataclass(frozen=True)
class Cause:
    """The candidate chosen as root cause, with the category and phase it stands for, and the runner-up."""

    candidate: Candidate
    category: Category
    phase: Phase | None
    runner_up: Candidate | None = None

    @property
    def line(self) -> LogLine:
        """The root-cause line."""
        return self.candidate.line

    @property
    def generic(self) -> bool:
        """Whether it only says that something died (a follow-up), not what."""
        return self.candidate.generic

    def evidence(self) -> dict[str, Any]:
        """Why: the rule that decided, the structure it read, and the close runner-up."""
        cand = self.candidate
        shape = cand.shape
        out: dict[str, Any] = {
            "rule": cand.rule,
            "specificity": cand.specificity,
            "line_no": cand.line.line_no,
            "exception_type": shape.exception_type if shape else None,
            "innermost_frame": shape.innermost if shape else None,
            "chained": cand.traceback.chained if cand.traceback else False,
            "runner_up": None,
        }
        other = self.runner_up
        if other is not None:
            out["runner_up"] = {"category": other.category.value, "rule": other.rule,
                                "specificity": other.specificity, "line_no": other.line.line_no}
        return out


def classify(evidence: Evidence, outcome: ProbeOutcome | None = None) -> Verdict:
    """Name the outcome of a launch from its log evidence and, when there is one, what the probes saw."""
    cause = root_cause(evidence)
    verdict = _on_host_failure(_decide(evidence, outcome, cause), evidence)
    if outcome is not None and outcome.scheduler_end is not None:
        return _ended_by_scheduler(verdict, outcome.scheduler_end)
    if cause is None:
        return verdict
    why = cause.evidence()
    why["similar"] = [near.to_dict() for near in similar_to(evidence, verdict)]
    return replace(verdict, evidence=why)


def _on_host_failure(verdict: Verdict, evidence: Evidence) -> Verdict:
    """A failure of the host or the orchestrator (a failing GPU, a full disk, a port race) is infra, not the cell's.

    Decided here once: the sweep reads a failing GPU from the verdict (retries.gpu_fault) to mark its host suspect.
    """
    why = host_failure(verdict, [e.text for e in (*evidence.errors, *evidence.cuda_errors)])
    return verdict if why is None else replace(verdict, status=Status.INFRA, reason=f"{why}: {verdict.reason}")


def _ended_by_scheduler(verdict: Verdict, end: SchedulerEnd) -> Verdict:
    """A launch the batch scheduler ended (time limit, preemption, node failure, an outside scancel).

    Never a pass: the server did not finish its probes on its own terms. Only running out of the job's
    memory says something about the server's configuration (`fail`); the rest are the cluster's (`infra`).
    The phase and line are where the log and the probes had got to; the reason is the scheduler's.
    """
    status = Status.FAIL if end.job_state == "OUT_OF_MEMORY" else Status.INFRA
    phase = verdict.phase if verdict.status is not Status.PASS else Phase.AFTER_DECODE
    return Verdict(status, phase, Category.PROCESS_KILLED, verdict.root_cause_line, reason=end.reason)


def _decide(evidence: Evidence, outcome: ProbeOutcome | None, cause: Cause | None) -> Verdict:
    if outcome is None:
        if cause is None:
            return _healthy(evidence, None)
        return _failed(cause, Phase.SERVING if cause.phase is Phase.READY else cause.phase)
    probe = outcome.failed_probe
    named = cause if cause is not None and not cause.generic else None
    if outcome.deadline_phase is not None:
        if named is not None:
            return _failed(named, named.phase or outcome.deadline_phase)
        if outcome.stalled_s is not None:  # cut at its stall window: the last progress line says where it stuck
            return _verdict(Category.HANG_OR_TIMEOUT, outcome.deadline_phase,
                            outcome.last_progress or _last_marker_line(evidence),
                            f"no progress in {outcome.deadline_phase.value} for {outcome.stalled_s:.0f} s "
                            "(its stall window)")
        return _verdict(Category.HANG_OR_TIMEOUT, outcome.deadline_phase, _last_marker_line(evidence),
                        f"no progress in {outcome.deadline_phase.value} before its deadline")
    if probe is not None:
        return _probe_failed(probe, named or cause, outcome)
    if not outcome.reached_ready:
        if cause is not None:
            if (outcome.exit_code in _KILLED_CODES and (cause.generic or cause.category in _VAGUE)
                    and teardown_line_no(evidence) is None):  # SGLang's own teardown ends with SIGKILL on itself
                cause = replace(cause, category=Category.PROCESS_KILLED)
            return _failed(cause, cause.phase or _marker_phase(evidence))
        category = Category.PROCESS_KILLED if outcome.exit_code in _KILLED_CODES else Category.UNKNOWN
        return _verdict(category, _marker_phase(evidence), _last_marker_line(evidence),
                        f"the server exited (code {outcome.exit_code}) before it was ready; the log names no cause")
    phase = outcome.probes[-1].phase if outcome.probes else Phase.READY
    return _healthy(evidence, phase)


def root_cause(evidence: Evidence) -> Cause | None:
    """The most specific failure the log shows that the server did not survive, or None."""
    found = candidates(evidence)
    if not found:
        return None
    found.sort(key=lambda c: (c.rank(), ts_key(c.line.ts), c.line.line_no))
    best = found[0]
    if best.signature is not None and best.signature.wraps:
        # A wrapper (`Initialization failed. warmup error`) never outranks a failure stated above it.
        above = [c for c in found if not c.generic and c.category is not best.category
                 and c.line.line_no < best.line.line_no]
        best = above[0] if above else best
    phase = _phase_of(evidence, best)
    category = best.category
    if category is Category.CUDA_OOM and _other_process_holds_memory(best.line.text, phase):
        category = Category.GPU_MEMORY_IN_USE
    if category in _VAGUE and phase is Phase.CUDA_GRAPH_CAPTURE:
        category = Category.CUDA_GRAPH_CAPTURE_FAILED
    runner = next((c for c in found[1:] if c.category is not best.category and not c.generic), None)
    close = runner is not None and best.specificity - runner.specificity <= CLOSE_CALL
    return Cause(best, category, phase, runner if close else None)


def _phase_of(evidence: Evidence, cand: Candidate) -> Phase | None:
    if cand.phase is not None:
        # vLLM has no self warm-up: once its uvicorn runs, it serves.
        return Phase.READY if cand.phase is Phase.WARMUP and evidence.engine == "vllm" else cand.phase
    if cand.implied is not None:
        return cand.implied
    return frame_phase(cand.traceback) if cand.traceback is not None else None


def _other_process_holds_memory(text: str, phase: Phase | None) -> bool:
    others = [_gib(m) for m in _OTHER_HOLDER.finditer(text)]
    if not others:
        return False
    this = _THIS_PROCESS.search(text)
    own = _PYTORCH_OWN.search(text)
    if this is not None:
        mine: float | None = _gib(this)
    elif own is not None:
        reserved = _RESERVED.search(text)
        mine = _gib(own) + (_gib(reserved) if reserved else 0.0)
    else:
        mine = None
    if mine is not None:
        return max(others) > 1.5 * mine + 1.0
    return phase is not None and phase.order <= Phase.MODEL_LOAD.order


def _gib(m: re.Match[str]) -> float:
    return float(m.group(1)) * _UNIT.get(m.group(2)[:1], 1.0)


def _marker_phase(evidence: Evidence) -> Phase | None:
    last = evidence.last_marker
    if last is None:
        return None
    if last.name == UVICORN_MARKER and evidence.engine == "vllm":
        return Phase.READY
    return last.phase


def _last_marker_line(evidence: Evidence) -> str | None:
    return evidence.last_marker.line.text if evidence.last_marker else None


def _message(line: LogLine, sig: Signature | None = None) -> str:
    """The line's message, cut to about 160 characters around what the signature matched."""
    text = parse(strip_ansi(line.text)).body.strip() or line.text.strip()
    if len(text) <= 160:
        return text
    m = sig.regex.search(text) if sig is not None else None
    start = max(0, m.start() - 40) if m is not None and m.start() > 100 else 0
    return ("..." if start else "") + text[start : start + 157] + "..."


def _failed(cause: Cause, phase: Phase | None) -> Verdict:
    status = Status.INVALID if cause.category is Category.INVALID_ARGUMENT and phase is Phase.ARG_PARSE else Status.FAIL
    where = f" during {phase.value}" if phase else ""
    said = _message(cause.line, cause.candidate.signature)
    reason = f"{LABELS[cause.category]}{where} (line {cause.line.line_no}): {said}"
    return Verdict(status, phase, cause.category, cause.line.text, reason)


def _probe_failed(probe: ProbeResult, cause: Cause | None, outcome: ProbeOutcome) -> Verdict:
    what = probe.error or ("wrong answer" if probe.wrong_answer else "timed out" if probe.timed_out else "failed")
    if cause is not None and not cause.generic:
        said = _message(cause.line, cause.candidate.signature)
        reason = f"probe {probe.name} failed ({what}); log: {LABELS[cause.category]}: {said}"
        return Verdict(Status.FAIL, probe.phase, cause.category, cause.line.text, reason, probe.name)
    if probe.wrong_answer:
        category = Category.WRONG_OUTPUT
    elif probe.timed_out:
        category = Category.HANG_OR_TIMEOUT
    elif cause is not None:
        category = cause.category
    else:
        category = Category.UNKNOWN
    root = cause.line.text if cause is not None else None
    return Verdict(Status.FAIL, probe.phase, category, root, f"probe {probe.name} failed: {what}", probe.name)


def _healthy(evidence: Evidence, phase: Phase | None) -> Verdict:
    reached = phase or _marker_phase(evidence)
    last = evidence.last_marker
    reason = f"no failure in the log; last marker: {last.name}" if last else "no failure in the log"
    return Verdict(Status.PASS, reached, Category.HEALTHY, _health_line(evidence), reason)


def _health_line(evidence: Evidence) -> str | None:
    """The line that shows health: the ready marker, else the last line of the furthest start-up milestone the log
    reached (uvicorn running, the engine's init done, graph capture ended), else the last line the log reached."""
    ready = ready_line_no(evidence)
    if ready is not None:
        return next(m.line.text for m in evidence.markers if m.line.line_no == ready)
    if evidence.last_marker is not None:
        return evidence.last_marker.line.text
    last = next((line for line in reversed(evidence.tail) if line.strip()), None)
    return last


def _verdict(category: Category, phase: Phase | None, root: str | None, reason: str) -> Verdict:
    return Verdict(Status.FAIL, phase, category, root, f"{LABELS[category]}: {reason}")
