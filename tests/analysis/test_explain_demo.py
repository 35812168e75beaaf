"""explain on a sweep shaped like the demo's (configs/glm5-nvfp4-sm120.yaml on the simulated host).

The matrix is the config's: 3 x 2 x 2 x 3 less the triton + bf16 exclude, with the include that
sets `sampling-backend` on every nsa cell, in 0.5.9 spelling. The failures follow DESIGN.md's
description of the scenario; the earliest failing phase wins, as in the simulator.
"""

from __future__ import annotations

from itertools import product

from orchestrator.analysis.explain import Explanation, explain
from orchestrator.analysis.inputs import CellOutcome
from orchestrator.model import Category, FlagValue, Phase, Status
from tests.analysis.test_inputs import DEEPGEMM_WARNING, PASS, cell, view

AXES = {
    "attention-backend": ["flashinfer", "triton", "nsa"],
    "nsa-decode-backend": ["flashmla_sparse", "flashmla_kv"],
    "kv-cache-dtype": ["fp8_e4m3", "bf16"],
    "fp8-gemm-backend": ["auto", "deep_gemm", "cutlass"],
}


def _cell(flags: dict[str, str]) -> CellOutcome:
    base: dict[str, FlagValue] = {"model-path": "/models/GLM-5-NVFP4", "tp-size": 8, "trust-remote-code": True}
    if flags["attention-backend"] == "nsa":
        base["sampling-backend"] = "pytorch"
    deep_gemm = flags["fp8-gemm-backend"] in ("auto", "deep_gemm")
    fp8_kv = flags["kv-cache-dtype"] == "fp8_e4m3"
    failures = [
        (deep_gemm, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS),
        (flags["attention-backend"] == "triton" and fp8_kv, Phase.MEMORY_ALLOC, Category.UNSUPPORTED_CONFIG),
        (flags["attention-backend"] == "flashinfer" and fp8_kv, Phase.SAMPLED_DECODE, Category.CUDA_DEVICE_ASSERT),
        (
            flags["attention-backend"] == "nsa" and flags["nsa-decode-backend"] == "flashmla_sparse",
            Phase.GREEDY_DECODE,
            Category.ILLEGAL_MEMORY_ACCESS,
        ),
    ]
    hits = sorted(((phase, category) for applies, phase, category in failures if applies), key=lambda h: h[0].order)
    verdict = (Status.FAIL, *hits[0], "RuntimeError") if hits else PASS
    return cell({**base, **flags}, verdict, warnings=(DEEPGEMM_WARNING,) if deep_gemm else (), axes=tuple(AXES))


def _demo() -> Explanation:
    combos = [dict(zip(AXES, values, strict=True)) for values in product(*AXES.values())]
    kept = [f for f in combos if not (f["attention-backend"] == "triton" and f["kv-cache-dtype"] == "bf16")]
    return explain(view([_cell(f) for f in kept]))


def test_the_demo_explains_nan_in_probs_by_the_fp8_gemm_backend_and_the_warning() -> None:
    result = _demo()
    nan = next(g for g in result.groups if g.category == "nan_in_probs")
    first, second = nan.findings[:2]
    assert first.flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert second.warning == DEEPGEMM_WARNING
    assert (first.fail_with, first.fail_total, first.pass_with, first.pass_total) == (12, 12, 0, 4)
    assert (second.fail_with, second.fail_total, second.pass_with, second.pass_total) == (12, 12, 0, 4)
    assert result.groups[0] is nan


def test_renamed_flags_appear_under_their_canonical_names() -> None:
    ima = next(g for g in _demo().groups if g.category == "illegal_memory_access")
    assert ima.findings[0].flags == {"attention-backend": ("dsa",), "dsa-decode-backend": ("flashmla_sparse",)}


def test_a_flag_an_include_sets_alongside_an_axis_is_not_a_second_finding() -> None:
    for group in _demo().groups:
        for finding in group.findings:
            if finding.kind == "flags":
                assert "sampling-backend" not in finding.flags, (group.category, finding.text)
