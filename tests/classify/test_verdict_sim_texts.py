"""The simulated host's failure texts are named as the kind that produced them (sim and classifier agree)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category, Phase
from orchestrator.sim import failures
from orchestrator.sim.logfmt import fmt

KINDS = sorted(
    c.value
    for c in Category
    if c.value not in failures.SILENT_KINDS
    and c
    not in (
        Category.HEALTHY,
        Category.INVALID_ARGUMENT,
        Category.WARMUP_REQUEST_FAILED,
        Category.HANG_OR_TIMEOUT,
        Category.WRONG_OUTPUT,
    )
)
BEFORE = {
    "model_load": [
        "server_args=ServerArgs(model_path='/m', tp_size=2)",
        "Init torch distributed begin.",
        "Load weight begin. avail mem=94.00 GB",
    ],
    "memory_alloc": ["Load weight begin. avail mem=94.00 GB", "Load weight end. type=X, avail mem=50.00 GB"],
    "cuda_graph_capture": ["Memory pool end. avail mem=10 GB", "Capture cuda graph begin. avail mem=10.00 GB"],
    "sampled_decode": [
        "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
        "The server is fired up and ready to roll!",
    ],
}
EXPECTED_PHASE = {"sampled_decode": Phase.SERVING}


@pytest.mark.parametrize("dsa_era", [False, True])
@pytest.mark.parametrize("phase", sorted(BEFORE))
@pytest.mark.parametrize("kind", KINDS)
def test_scheduler_failures(kind: str, phase: str, dsa_era: bool) -> None:
    holder = kind == "gpu_memory_in_use"
    ctx = failures.Context(dsa_era=dsa_era, other_pid=4242 if holder else None, other_gib=80.0 if holder else 0.0)
    text = failures.scheduler_failure(kind, phase, ctx)
    log = [
        *(fmt(m, " TP0") for m in BEFORE[phase]),
        *text.before,
        fmt(f"Scheduler hit an exception: {text.traceback[0]}", " TP0"),
        *text.traceback[1:],
        fmt("Received sigquit from a child process. It usually means the child failed."),
        "Killed",
    ]
    verdict = classify(extract_evidence(log))
    # Real SGLang reports any plain exception during capture as `Capture cuda graph failed`; so do we.
    vague_in_capture = kind == "python_exception_other" and phase == "cuda_graph_capture"
    assert verdict.category.value == ("cuda_graph_capture_failed" if vague_in_capture else kind)
    assert verdict.phase is EXPECTED_PHASE.get(phase, Phase(phase))
    assert verdict.root_cause_line in log


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "gpu_memory_in_use"])
def test_main_process_failures_before_any_marker(kind: str) -> None:
    log = failures.main_process_failure(kind, failures.Context())
    verdict = classify(extract_evidence(log))
    assert verdict.category.value == kind
    assert verdict.root_cause_line in log


def test_warmup_failure() -> None:
    lines = failures.warmup_failure(failures.Context())
    log = [
        fmt("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"),
        fmt(f"Initialization failed. warmup error: {lines[0]}"),
        *lines[1:],
    ]
    verdict = classify(extract_evidence(log))
    assert (verdict.category, verdict.phase, verdict.root_cause_line) == (
        Category.WARMUP_REQUEST_FAILED,
        Phase.WARMUP,
        log[-1],  # the status the warm-up request got names the cause; the line above only wraps it
    )
