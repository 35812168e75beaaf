"""Evidence (+ what the probes saw) -> Verdict: status, phase, category and the line that says why (pure).

The root cause is the hit of the most specific signature; among equals, the line that starts with the
exception, then the earliest by time. A hit the server survived (it printed its ready marker afterwards)
is not a cause. Two rules refine the category beyond the table:
- CUDA out of memory while another process holds most of the GPU is `gpu_memory_in_use`. Offline the
  pids mean nothing, so the rule reads the amounts PyTorch prints: another process ("Process N has X GiB
  memory in use") holding more than half again this process's share ("this process has Y GiB", else what
  PyTorch allocated and reserved), or, when this process's share is not printed, any other holder while
  the weights were not yet loaded.
- An error that names nothing more specific (a Python exception, a segfault, a follow-up) during CUDA-graph
  capture is `cuda_graph_capture_failed`: current SGLang wraps every capture error that way itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.classify.phase import frame_phase, traceback_of
from orchestrator.harvest.records import Evidence, Hit, LogLine
from orchestrator.knowledge.lines import parse, strip_ansi, ts_key
from orchestrator.knowledge.markers import READY_MARKER, UVICORN_MARKER
from orchestrator.knowledge.patterns import Signature
from orchestrator.knowledge.signatures import BY_ID
from orchestrator.model import Category, Phase, ProbeOutcome, ProbeResult, Status, Verdict

_OTHER_HOLDER = re.compile(r"Process \d+ has ([\d.]+) ([KMGT]i?B) memory in use")
_THIS_PROCESS = re.compile(r"this process has ([\d.]+) ([KMGT]i?B) memory in use")
_PYTORCH_OWN = re.compile(r"Of the allocated memory ([\d.]+) ([KMGT]i?B) is allocated by PyTorch")
_RESERVED = re.compile(r"([\d.]+) ([KMGT]i?B) is reserved by PyTorch but unallocated")
_UNIT = {"K": 1 / (1 << 20), "M": 1 / 1024, "G": 1.0, "T": 1024.0}
_VAGUE = frozenset({Category.UNKNOWN, Category.PYTHON_EXCEPTION_OTHER})
_KILLED_CODES = frozenset({-9, 137})

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
    """The hit chosen as root cause, with the category and phase it stands for."""

    hit: Hit
    signature: Signature
    category: Category
    phase: Phase | None


def classify(evidence: Evidence, outcome: ProbeOutcome | None = None) -> Verdict:
    """Name the outcome of a launch from its log evidence and, when there is one, what the probes saw."""
    cause = root_cause(evidence)
    if outcome is None:
        if cause is None:
            return _healthy(evidence, None)
        return _failed(cause, Phase.SERVING if cause.phase is Phase.READY else cause.phase)
    probe = outcome.failed_probe
    named = cause if cause is not None and not cause.signature.generic else None
    if outcome.deadline_phase is not None:
        if named is not None:
            return _failed(named, named.phase or outcome.deadline_phase)
        return _verdict(Category.HANG_OR_TIMEOUT, outcome.deadline_phase, _last_marker_line(evidence),
                        f"no progress in {outcome.deadline_phase.value} before its deadline")
    if probe is not None:
        return _probe_failed(probe, named or cause, outcome)
    if not outcome.reached_ready:
        if cause is not None:
            return _failed(cause, cause.phase or _marker_phase(evidence))
        category = Category.PROCESS_KILLED if outcome.exit_code in _KILLED_CODES else Category.UNKNOWN
        return _verdict(category, _marker_phase(evidence), _last_marker_line(evidence),
                        f"the server exited (code {outcome.exit_code}) before it was ready; the log names no cause")
    phase = outcome.probes[-1].phase if outcome.probes else Phase.READY
    return _healthy(evidence, phase)


def root_cause(evidence: Evidence) -> Cause | None:
    """The most specific failure the log shows that the server did not survive, or None."""
    ready = _ready_line_no(evidence)
    best: tuple[tuple[int, int], tuple[tuple[int, ...], int], Hit, Signature] | None = None
    for hit in evidence.hits:
        sig = BY_ID.get(hit.signature)
        if sig is None or (ready is not None and hit.line.line_no < ready):
            continue
        if sig.context_regex is not None:
            tb = traceback_of(evidence, hit) if hit.traceback is not None else None
            if tb is None or not sig.context_regex.search(tb.text):
                continue
        rank = (-sig.specificity, -int(hit.leads and not sig.generic))
        when = (ts_key(hit.line.ts), hit.line.line_no)
        if best is None or (rank, when) < (best[0], best[1]):
            best = (rank, when, hit, sig)
    if best is None:
        return None
    hit, sig = best[2], best[3]
    phase = _phase_of(evidence, hit, sig)
    category = sig.category
    if category is Category.CUDA_OOM and _other_process_holds_memory(hit.line.text, phase):
        category = Category.GPU_MEMORY_IN_USE
    if category in _VAGUE and phase is Phase.CUDA_GRAPH_CAPTURE:
        category = Category.CUDA_GRAPH_CAPTURE_FAILED
    return Cause(hit, sig, category, phase)


def _phase_of(evidence: Evidence, hit: Hit, sig: Signature) -> Phase | None:
    if hit.phase is not None:
        # vLLM has no self warm-up: once its uvicorn runs, it serves.
        return Phase.READY if hit.phase is Phase.WARMUP and evidence.engine == "vllm" else hit.phase
    if sig.phase is not None:
        return sig.phase
    tb = traceback_of(evidence, hit)
    return frame_phase(tb) if tb is not None else None


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


def _ready_line_no(evidence: Evidence) -> int | None:
    ready = evidence.marker(READY_MARKER)
    if ready is None and evidence.engine == "vllm":
        ready = evidence.marker(UVICORN_MARKER)
    return ready.line.line_no if ready else None


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
    said = _message(cause.hit.line, cause.signature)
    reason = f"{LABELS[cause.category]}{where} (line {cause.hit.line.line_no}): {said}"
    return Verdict(status, phase, cause.category, cause.hit.line.text, reason)


def _probe_failed(probe: ProbeResult, cause: Cause | None, outcome: ProbeOutcome) -> Verdict:
    what = probe.error or ("wrong answer" if probe.wrong_answer else "timed out" if probe.timed_out else "failed")
    if cause is not None and not cause.signature.generic:
        said = _message(cause.hit.line, cause.signature)
        reason = f"probe {probe.name} failed ({what}); log: {LABELS[cause.category]}: {said}"
        return Verdict(Status.FAIL, probe.phase, cause.category, cause.hit.line.text, reason, probe.name)
    if probe.wrong_answer:
        category = Category.WRONG_OUTPUT
    elif probe.timed_out:
        category = Category.HANG_OR_TIMEOUT
    elif cause is not None:
        category = cause.category
    else:
        category = Category.UNKNOWN
    root = cause.hit.line.text if cause is not None else None
    return Verdict(Status.FAIL, probe.phase, category, root, f"probe {probe.name} failed: {what}", probe.name)


def _healthy(evidence: Evidence, phase: Phase | None) -> Verdict:
    reached = phase or _marker_phase(evidence)
    last = evidence.last_marker
    reason = f"no failure in the log; last marker: {last.name}" if last else "no failure in the log"
    return Verdict(Status.PASS, reached, Category.HEALTHY, _last_marker_line(evidence), reason)


def _verdict(category: Category, phase: Phase | None, root: str | None, reason: str) -> Verdict:
    return Verdict(Status.FAIL, phase, category, root, f"{LABELS[category]}: {reason}")
