"""Two families read through the whole harvest and verdict: an exception that tells the user to use another backend
for what the model or flags need (unsupported_config), and Intel Gaudi's graph compile that fails (kernel_jit_error).
Each case is a wording the projects print, with values of its own, not one log's text."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category
TB = ["Traceback (most recent call last):",
      '  File "/usr/lib/python3/site-packages/vllm/attention/backends/flash_attn.py", line 286, in build',
      "    raise ValueError("]


@pytest.mark.parametrize(
    ("lines", "category", "root"),
    [
        # vLLM's FlashAttention builder refusing a model with logits soft-capping, raised in a worker (rank prefix).
        ([*TB, "[rank0]: ValueError: Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). "
          "Otherwise, the output might be wrong. Set Flashinfer backend by export VLLM_ATTENTION_BACKEND=FLASHINFER."],
         C.UNSUPPORTED_CONFIG, -1),
        ([*TB, "ValueError: TRTLLM attention does not support cascade attention. Please use FlashInfer backend."],
         C.UNSUPPORTED_CONFIG, -1),
        ([*TB, "RuntimeError: Sliding window with sinks is unavailable here; please switch to the triton attention "
          "backend."], C.UNSUPPORTED_CONFIG, -1),
        # Gaudi's graph compiler failing to load a TPC kernel, then the Synapse API and the PyTorch bridge reporting
        # the compile that failed: the first statement is the cause.
        (["[07:12:01.000101][GC                    ][error][tid:1A2B] Failed to load tpc kernel for node: TPC17, "
          "GUID: gather_fwd_i32. Got error: GLUE_FAILED",
          "[07:12:01.000150][SYN_RECIPE    ][error][tid:1A2B] compileGraph: Can not compile graph",
          "[07:12:01.000190][PT_BRIDGE       ][error][tid:1A2B] graph.cpp: 599Graph compile failed. "
          "synStatus=synStatus 26 [Generic failure]. compile"], C.KERNEL_JIT_ERROR, 0),
        # Only the bridge's report, as a Python-side log may carry it.
        (["ERROR 03-02 11:00:00 [hpu_model_runner.py:900] graph.cpp: 612Graph compile failed. synStatus=synStatus 26 "
          "[Generic failure]. compile"], C.KERNEL_JIT_ERROR, 0),
        (["[11:00:00.5][SYN_API       ][error][tid:9] synGraphCompile: SYN_API_CALL failed status: 26[synFail]. "
          "graphHandle 0x55d0"], C.KERNEL_JIT_ERROR, 0),
    ],
)
def test_family_decides(lines: list[str], category: Category, root: int) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (category, lines[root])


@pytest.mark.parametrize(
    "line",
    [
        # The same advice logged as a warning: vLLM falls back to a slower backend and serves.
        "WARNING 10-10 11:12:03 [selector.py:229] Please use FlashInfer backend with FP8 KV Cache for better "
        "performance by setting environment variable VLLM_ATTENTION_BACKEND=FLASHINFER",
        "INFO 10-10 11:12:03 [selector.py:227] Cannot use FlashAttention-2 backend for FP8 KV cache.",
    ],
)
def test_backend_advice_in_a_warning_stays_healthy(line: str) -> None:
    assert classify(extract_evidence([line])).category is C.HEALTHY
