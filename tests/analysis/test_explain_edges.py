"""explain where evidence is awkward: interactions, flaky cells, tiny matrices, nothing to find."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.analysis.explain import explain
from orchestrator.analysis.render import render_explanation
from orchestrator.model import Category, Phase, Status
from tests.analysis.test_inputs import (
    DEEPGEMM_WARNING,
    NAN_LINE,
    PASS,
    Verdict,
    cell,
    incident_view,
    matrix,
    view,
)

NAN: Verdict = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE)
IMA: Verdict = (Status.FAIL, Phase.CUDA_GRAPH_CAPTURE, Category.ILLEGAL_MEMORY_ACCESS, "illegal memory access")


def test_an_interaction_of_two_flags_ranks_the_pair_first() -> None:
    axes = {
        "attention-backend": ["triton", "flashinfer", "fa3"],
        "kv-cache-dtype": ["fp8_e4m3", "bf16"],
        "cuda-graph-max-bs": ["8", "16"],
    }

    def rule(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
        both = flags["attention-backend"] == "triton" and flags["kv-cache-dtype"] == "fp8_e4m3"
        return (IMA if both else PASS), ()

    group = explain(view(matrix(axes, rule))).groups[0]
    first, second = group.findings[:2]
    assert first.kind == "flags"
    assert first.flags == {"attention-backend": ("triton",), "kv-cache-dtype": ("fp8_e4m3",)}
    assert (first.fail_with, first.fail_total, first.pass_with, first.pass_total) == (2, 2, 0, 10)
    assert second.flags == {"attention-backend": ("triton",)} and second.pass_with == 2
    assert first.score > second.score + 0.04
    assert any("thin evidence: 2 failing and 10 passing" in note for note in group.notes)


def test_flaky_cells_sit_on_neither_side_and_are_listed_apart() -> None:
    cells = list(incident_view().cells)
    passing = [i for i, c in enumerate(cells) if c.status is Status.PASS][:2]
    failing = [i for i, c in enumerate(cells) if c.category is Category.NAN_IN_PROBS][:1]
    for i in passing:
        cells[i] = replace(cells[i], attempts=3, passes=2)
    for i in failing:
        cells[i] = replace(cells[i], attempts=3, passes=1)
    result = explain(view(cells))
    first = result.findings[0]
    assert first.flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert (first.fail_with, first.fail_total, first.pass_with, first.pass_total) == (11, 11, 0, 4)
    assert {c.cell_id for c in result.flaky} == {cells[i].cell_id for i in passing + failing}
    assert any("1 flaky cell(s)" in note for note in result.groups[0].notes)
    assert len(result.to_dict()["flaky"]) == 3
    assert "flaky, left out of every group" in render_explanation(result, "md")


def test_one_failing_cell_gets_a_note_not_a_claim() -> None:
    cells = [
        cell({"fp8-gemm-backend": "auto"}, NAN, warnings=(DEEPGEMM_WARNING,)),
        cell({"fp8-gemm-backend": "cutlass"}),
    ]
    group = explain(view(cells)).groups[0]
    assert group.findings == () and not group.separated
    assert "only one cell failed with nan_in_probs" in group.notes[0]
    assert "fp8-gemm-backend=auto (passing: cutlass)" in group.notes[1]
    assert "warnings only in the failing cell: DeepGemm is enabled" in group.notes[1]
    assert "nothing separates it" in render_explanation(explain(view(cells)), "md")


def test_nothing_separating_is_said_explicitly() -> None:
    axes = {"a": ["x", "y"], "b": ["p", "q"], "c": ["m", "n"]}

    def parity(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
        odd = (flags["a"] == "x") ^ (flags["b"] == "p") ^ (flags["c"] == "m")
        return (NAN if odd else PASS), ("common warning",)

    group = explain(view(matrix(axes, parity))).groups[0]
    assert group.findings == ()
    assert group.notes[0].startswith("nothing separates these 4 failing cells from the 4 passing cells")


def test_a_partial_separation_is_listed_but_not_called_clear() -> None:
    cells = [cell({"a": "x", "b": str(i)}, NAN) for i in range(4)]
    cells += [cell({"a": "y", "b": str(i)}, NAN) for i in range(4, 6)]
    cells += [cell({"a": "x", "b": str(i)}) for i in range(6, 7)]
    cells += [cell({"a": "y", "b": str(i)}) for i in range(7, 12)]
    group = explain(view(cells)).groups[0]
    assert group.findings[0].flags == {"a": ("x",)}
    assert all("b" not in f.flags for f in group.findings), "a value per cell would only list the cells"
    assert not group.separated
    assert group.notes[0].startswith("no clear separation: the best, a=x, holds in 4 of 6 failing and 1 of 6")


def test_no_passing_cell_means_nothing_to_compare_against() -> None:
    cells = [cell({"a": v}, NAN) for v in "xyz"]
    group = explain(view(cells)).groups[0]
    assert group.findings == ()
    assert group.notes == ("no cell passed, so there is nothing to set these 3 failing cell(s) against",)


def test_invalid_cells_form_the_invalid_argument_group_and_infra_is_left_out() -> None:
    invalid: Verdict = (Status.INVALID, Phase.ARG_PARSE, Category.UNSUPPORTED_CONFIG, "argument --x: invalid choice")
    infra: Verdict = (Status.INFRA, None, Category.UNKNOWN, "ssh connection lost")
    cells = [cell({"a": "bad", "b": v}, invalid) for v in "pqr"]
    cells += [cell({"a": "good", "b": v}) for v in "pqr"]
    cells += [cell({"a": "good", "b": "s"}, infra)]
    result = explain(view(cells))
    assert [g.category for g in result.groups] == ["invalid_argument"]
    assert result.findings[0].flags == {"a": ("bad",)}
    assert (result.pass_total, result.excluded) == (3, 1)


def test_an_unset_flag_is_a_value_too() -> None:
    cells = [cell({"a": v}, NAN) for v in "xy"] + [cell({"a": v, "enable-x": True}) for v in "xy"]
    finding = explain(view(cells)).findings[0]
    assert finding.flags == {"enable-x": (None,)}
    assert finding.text == "enable-x=(unset)"
    assert finding.to_dict()["flags"] == {"enable-x": [None]}


def test_the_install_is_an_axis_when_a_sweep_has_several() -> None:
    cells = [cell({"a": v}, NAN, install="nightly") for v in "xyz"]
    cells += [cell({"a": v}, install="stable") for v in "xyz"]
    finding = explain(view(cells)).findings[0]
    assert finding.flags == {"install": ("nightly",)}


def test_a_missing_warning_counts_only_where_failing_cells_got_past_startup() -> None:
    late = "CUDA graph capture finished"
    early: Verdict = (Status.FAIL, Phase.MEMORY_ALLOC, Category.CUDA_OOM, "CUDA out of memory")
    cells = [cell({"a": "x", "b": v}, early) for v in "pqr"]
    cells += [cell({"a": "y", "b": v}, NAN) for v in "pqr"]
    cells += [cell({"a": "z", "b": v}, warnings=(late,)) for v in "pqr"]
    groups = {g.category: g for g in explain(view(cells)).groups}
    assert all(f.warning != late for f in groups["cuda_oom"].findings)
    absent = next(f for f in groups["nan_in_probs"].findings if f.warning == late)
    assert not absent.present and (absent.fail_with, absent.pass_with) == (3, 0)
    assert absent.text == f"no warning {late}"


def test_groups_of_equal_size_are_ordered_by_name() -> None:
    cells = [cell({"a": "x", "b": v}, NAN) for v in "pq"] + [cell({"a": "y", "b": v}, IMA) for v in "pq"]
    cells += [cell({"a": "z", "b": v}) for v in "pq"]
    result = explain(view(cells))
    assert [g.category for g in result.groups] == ["illegal_memory_access", "nan_in_probs"]
    assert [f.category for f in result.findings] == ["illegal_memory_access", "nan_in_probs"]


def test_a_sweep_with_no_failure_says_so() -> None:
    result = explain(view([cell({"a": "x"}), cell({"a": "y"})]))
    assert result.groups == () and result.findings == ()
    assert "no cell failed (2 passed)" in render_explanation(result, "term")
    assert "no cell failed (2 passed)" in render_explanation(result, "md")


def test_a_second_cause_in_the_same_category_is_pointed_out() -> None:
    axes = {
        "attention-backend": ["dsa", "flashinfer", "triton"],
        "kv-cache-dtype": ["fp8_e4m3", "bf16"],
        "fp8-gemm-backend": ["auto", "deep_gemm", "cutlass"],
        "dsa-decode-backend": ["flashmla_sparse", "flashmla_kv"],
    }

    def rule(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
        deep_gemm = flags["fp8-gemm-backend"] != "cutlass"
        flashinfer_fp8 = flags["attention-backend"] == "flashinfer" and flags["kv-cache-dtype"] == "fp8_e4m3"
        return (NAN if deep_gemm or flashinfer_fp8 else PASS), ((DEEPGEMM_WARNING,) if deep_gemm else ())

    group = explain(view(matrix(axes, rule))).groups[0]
    first, second = group.findings[:2]
    assert first.flags == {"fp8-gemm-backend": ("auto", "deep_gemm")}
    assert (first.fail_with, first.fail_total, first.pass_with, first.pass_total) == (24, 26, 0, 10)
    assert second.warning == DEEPGEMM_WARNING and (second.fail_with, second.pass_with) == (24, 0)
    assert (
        "a second cause? attention-backend=flashinfer and kv-cache-dtype=fp8_e4m3 holds in 2 of the 2 failing "
        "cells finding 1 does not cover, and in 0 of 10 passing cells"
    ) in group.notes
