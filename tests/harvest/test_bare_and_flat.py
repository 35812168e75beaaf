"""Lines and tracebacks a paste or a kernel printed bare: no prefix, no level, no indentation (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import EvidenceBuilder, extract_evidence
from orchestrator.harvest.prefilter import PREFILTER
from orchestrator.model import Category

C = Category


def _live(lines: list[str]) -> dict[str, object]:
    builder = EvidenceBuilder()
    for line in lines:
        builder.feed_line(line)
    return builder.finish().to_dict()


@pytest.mark.parametrize(
    "refusal",
    ["This kernel only supports sm100", "This kernel only supports sm120.",
     "FP8 PER_BLOCK SM120 kernel only supports sm120f."],
)
def test_a_kernels_bare_refusal_of_the_architecture_is_read_before_the_trap_it_raises(refusal: str) -> None:
    lines = [refusal, "cudaErrorLaunchFailure: unspecified launch failure"]
    assert PREFILTER.interesting(refusal) and PREFILTER.interesting_bytes(refusal.encode())
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, refusal)
    assert _live(lines) == extract_evidence(lines).to_dict()
