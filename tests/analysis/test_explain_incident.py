"""explain on the incident's matrix: the DeepGEMM cause comes first, red herrings never do."""

from __future__ import annotations

import json
from dataclasses import replace

from orchestrator.analysis.explain import explain
from orchestrator.analysis.predicates import Predicate, Row, score
from orchestrator.analysis.render import render_explanation
from orchestrator.model import Status
from tests.analysis.test_inputs import DEEPGEMM_WARNING, incident_view, view

FINDING_KEYS = {
    "category",
    "kind",
    "flags",
    "warning",
    "fail_with",
    "fail_total",
    "pass_with",
    "pass_total",
    "score",
}
HERRING = "Some weights of the model checkpoint were not used when initializing the model."


def test_first_nan_finding_is_the_fp8_gemm_backend_with_exact_counts() -> None:
    result = explain(incident_view())
    first = result.findings[0]
    assert first.category == "nan_in_probs"
    assert first.kind == "flag"
    assert first.flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert (first.fail_with, first.fail_total, first.pass_with, first.pass_total) == (12, 12, 0, 6)
    assert first.score == 1.0


def test_the_deepgemm_warning_is_a_finding_with_the_same_counts() -> None:
    nan = [f for f in explain(incident_view()).findings if f.category == "nan_in_probs"]
    warning = next(f for f in nan if f.kind == "warning")
    assert warning.warning == DEEPGEMM_WARNING and warning.present
    assert (warning.fail_with, warning.fail_total, warning.pass_with, warning.pass_total) == (12, 12, 0, 6)
    assert nan.index(warning) == 1


def test_flag_and_warning_holding_in_the_same_cells_are_said_to_be_indistinguishable() -> None:
    group = explain(incident_view()).groups[0]
    assert group.separated
    assert any("findings 1 and 2 hold in exactly the same cells" in note for note in group.notes)


def test_groups_come_largest_first_and_the_interaction_explains_unsupported_config() -> None:
    result = explain(incident_view())
    assert [g.category for g in result.groups] == ["nan_in_probs", "unsupported_config"]
    first = result.groups[1].findings[0]
    assert first.kind == "flags"
    assert first.flags == {"attention-backend": ("triton",), "kv-cache-dtype": ("fp8_e4m3",)}
    assert (first.fail_with, first.pass_with, first.score) == (6, 0, 0.95)


def test_no_pair_is_listed_where_a_single_flag_separates_perfectly() -> None:
    nan = explain(incident_view()).groups[0]
    assert all(f.kind != "flags" for f in nan.findings)


def test_attention_backend_failing_everywhere_is_not_named_as_the_cause() -> None:
    nan = explain(incident_view()).groups[0]
    assert all("attention-backend" not in f.flags for f in nan.findings)


def test_a_warning_in_every_cell_has_zero_separation_and_is_never_listed() -> None:
    cells = [replace(c, warnings=(*c.warnings, HERRING)) for c in incident_view().cells]
    result = explain(view(cells))
    assert result.findings[0].flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert all(f.warning != HERRING for f in result.findings)
    rows = [Row(c.cell_id, c.label, c.canonical_flags, frozenset(c.warnings)) for c in cells]
    fails = [r for r, c in zip(rows, cells, strict=True) if c.category.value == "nan_in_probs"]
    passes = [r for r, c in zip(rows, cells, strict=True) if c.status is Status.PASS]
    herring = score(Predicate("warning", warning=HERRING), fails, passes)
    assert herring.separation == 0
    assert (herring.fail_with, herring.pass_with) == (12, 6)


def test_a_warning_common_on_both_sides_does_not_outrank_the_cause() -> None:
    # Present in 10 of 12 failing and 5 of 6 passing cells: frequent, yet it separates nothing.
    cells = list(incident_view().cells)
    nan = [i for i, c in enumerate(cells) if c.category.value == "nan_in_probs"][:10]
    ok = [i for i, c in enumerate(cells) if c.status is Status.PASS][:5]
    for i in nan + ok:
        cells[i] = replace(cells[i], warnings=(*cells[i].warnings, HERRING))
    result = explain(view(cells))
    assert result.findings[0].flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert all(f.warning != HERRING for f in result.findings)


def test_json_keeps_the_contract() -> None:
    data = json.loads(render_explanation(explain(incident_view()), "json"))
    assert data["findings"], data
    for finding in data["findings"]:
        assert set(finding) >= FINDING_KEYS
        assert finding["kind"] in {"flag", "flags", "warning"}
        assert all(isinstance(values, list) for values in finding["flags"].values())
    assert data["findings"][0]["flags"] == {"fp8-gemm-backend": ["auto", "deep_gemm"]}
    assert data["findings"][0]["warning"] is None


def test_markdown_summary_names_the_cause_and_the_warning() -> None:
    md = render_explanation(explain(incident_view()), "md")
    first_bullet = next(line for line in md.splitlines() if line.startswith("- **nan_in_probs**"))
    assert "`fp8-gemm-backend in {auto, deep_gemm}` (12/12 failing, 0/6 passing)" in first_bullet
    assert "DeepGemm is enabled" in first_bullet
    assert "- **unsupported_config** (6 failing): (1) `attention-backend=triton and kv-cache-dtype=fp8_e4m3`" in md


def test_terminal_table_lists_findings_with_counts() -> None:
    text = render_explanation(explain(incident_view()), "term", width=120)
    assert "nan_in_probs: 12 failing vs 6 passing cells" in text
    assert "fp8-gemm-backend in {auto, deep_gemm}" in text
    assert "12/12" in text and "0/6" in text
    assert "\x1b[" not in text
