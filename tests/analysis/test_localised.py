"""explain after an adaptive sweep: causes the cells proved are first and confirmed (one value set per flag),
what is still in doubt is named with why the sweep stopped; other strategies are explained as before."""

from __future__ import annotations

import json
from dataclasses import replace

from orchestrator.analysis.explain import explain
from orchestrator.analysis.render import render_explanation
from orchestrator.model import Category, Phase, Status
from tests.analysis.test_inputs import INCIDENT_AXES, NAN_LINE, PASS, Verdict, cell, incident_view, matrix, view

NAN: Verdict = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE)


def test_confirmed_values_of_one_flag_read_as_one_finding() -> None:
    adaptive = replace(incident_view(), strategy="adaptive", plan_stop="explained")
    found = explain(adaptive)
    nan = next(g for g in found.groups if g.category == "nan_in_probs")
    assert nan.findings[0].confirmed and nan.findings[0].flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert nan.candidates_left == ()
    assert nan.notes[0].startswith("confirmed: fp8-gemm-backend in {auto, deep_gemm} is the only explanation left")
    text = render_explanation(found, "term", width=200)
    assert "fp8-gemm-backend in {auto, deep_gemm} (confirmed)" in text
    data = json.loads(render_explanation(found, "json"))
    assert data["findings"][0]["confirmed"] is True
    assert "confirmed" in render_explanation(found, "md")
    # The same cells, swept whole: nothing is marked, the explanation is what it always was.
    plain = explain(incident_view())
    assert not any(f.confirmed for f in plain.findings)
    assert [f.text for f in plain.findings] == [f.text for f in plain.findings if not f.confirmed]


def test_a_budget_cut_names_the_candidates_left() -> None:
    axes = {k: INCIDENT_AXES[k] for k in ("attention-backend", "kv-cache-dtype", "fp8-gemm-backend")}
    base = matrix(axes, lambda f: (PASS, ()))
    failing = cell({"model-path": "zai-org/GLM-5-NVFP4", "attention-backend": "triton", "kv-cache-dtype": "bf16",
                    "fp8-gemm-backend": "cutlass"}, NAN, axes=tuple(axes))  # fmt: skip
    passing = [c for c in base if c.flags["attention-backend"] == "dsa" and c.flags["fp8-gemm-backend"] == "auto"]
    cut = replace(view([failing, *passing]), strategy="adaptive", plan_stop="budget")
    group = next(g for g in explain(cut).groups if g.category == "nan_in_probs")
    assert not any(f.confirmed for f in group.findings)
    assert "attention-backend=triton" in group.candidates_left
    # triton never failed without bf16: the pair is as likely as triton alone, so both are named, singles first.
    assert "attention-backend=triton and kv-cache-dtype=bf16" in group.candidates_left
    assert " and " not in group.candidates_left[0]
    assert any(n.startswith("not confirmed (the budget of launched cells ran out)") for n in group.notes)
    assert any("--strategy full --resume s1" in n for n in group.notes)
