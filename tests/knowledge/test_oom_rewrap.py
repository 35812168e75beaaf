"""vLLM re-raises a device OOM during its warm-up with advice (`CUDA out of memory occurred when warming up ...`): the
original error is the root line where the log has it, in whichever order a paste puts the two; alone, the re-raise
still states the OOM."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category
ORIGINAL = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of "
            "10.75 GiB of which 612.00 MiB is free.")
REWRAP = ("RuntimeError: CUDA out of memory occurred when warming up sampler with 128 dummy requests. Please try "
          "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.")
POOLER = ("RuntimeError: CUDA out of memory occurred when warming up pooler (embed) with 64 dummy requests. Please "
          "try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.")


@pytest.mark.parametrize(
    "lines",
    [
        [REWRAP, "", "The above exception was the direct cause of the following exception:", ORIGINAL],
        [ORIGINAL, "", "The above exception was the direct cause of the following exception:", "", REWRAP],
        [ORIGINAL, "", POOLER],
    ],
)
def test_the_original_oom_is_the_root_line(lines: list[str]) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, ORIGINAL)


@pytest.mark.parametrize("line", [REWRAP, POOLER])
def test_the_rewrap_alone_still_states_the_oom(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, line)
