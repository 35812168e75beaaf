"""compare: cells matched across SGLang's flag renames, and only real changes reported."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from orchestrator.analysis.compare import (
    compare,
    compare_installs,
    failure_signature,
    split_by_install,
)
from orchestrator.analysis.environment import env_diff
from orchestrator.analysis.inputs import CellOutcome
from orchestrator.analysis.render import render_comparison
from orchestrator.model import Category, Phase, Status
from tests.analysis.test_inputs import NAN_LINE, PASS, Verdict, matrix, view

AXES_059 = {"attention-backend": ["nsa", "triton"], "nsa-decode-backend": ["flashmla_sparse", "tilelang"]}
AXES_0523 = {"attention-backend": ["dsa", "triton"], "dsa-decode-backend": ["flashmla_sparse", "tilelang"]}
NAN: Verdict = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE)
OOM: Verdict = (Status.FAIL, Phase.MEMORY_ALLOC, Category.CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory.")
CONTRACT = {"regressions", "fixes", "changed", "added", "removed", "env_diff"}


def _all_pass(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
    return PASS, ()


def _sweeps() -> tuple[list[CellOutcome], list[CellOutcome]]:
    return matrix(AXES_059, _all_pass), matrix(AXES_0523, _all_pass)


def _set(cells: list[CellOutcome], flags: dict[str, str], **changes: object) -> None:
    i = next(i for i, c in enumerate(cells) if all(c.flags.get(k) == v for k, v in flags.items()))
    cells[i] = replace(cells[i], **changes)  # type: ignore[arg-type]


def test_renamed_flags_match_and_one_regression_is_all_that_is_reported() -> None:
    before, after = _sweeps()
    broken = {"attention-backend": "dsa", "dsa-decode-backend": "tilelang"}
    _set(after, broken, status=NAN[0], phase=NAN[1], category=NAN[2], root_cause_line=NAN[3])
    result = compare(view(before, version="0.5.9"), view(after, sweep_id="s2", version="0.5.23"))
    assert [c.flags["dsa-decode-backend"] for c in result.regressions] == ["tilelang"]
    assert result.regressions[0].flags["attention-backend"] == "dsa"
    assert (result.fixes, result.changed, result.added, result.removed) == ((), (), (), ())
    assert result.matched == 4
    assert result.env_diff == {"sglang": ("0.5.9", "0.5.23")}
    data = result.to_dict()
    assert data["regressions"][0]["before"]["status"] == "pass"
    assert data["regressions"][0]["after"] == {
        **data["regressions"][0]["after"],
        "status": "fail",
        "category": "nan_in_probs",
    }
    assert data["env_diff"] == {"sglang": ["0.5.9", "0.5.23"]}


def test_fixes_and_unverified_cells() -> None:
    before, after = _sweeps()
    _set(
        before,
        {"attention-backend": "triton", "nsa-decode-backend": "tilelang"},
        status=Status.FAIL,
        category=Category.CUDA_OOM,
    )
    _set(
        after,
        {"attention-backend": "dsa", "dsa-decode-backend": "flashmla_sparse"},
        status=Status.INFRA,
        category=Category.UNKNOWN,
    )
    result = compare(view(before), view(after))
    assert [c.label for c in result.fixes] == ["attention-backend=triton, dsa-decode-backend=tilelang"]
    assert [c.after.status for c in result.unverified if c.after] == [Status.INFRA]
    assert result.regressions == ()


@pytest.mark.parametrize(
    ("before_line", "after_line", "changed"),
    [
        (
            "[2026-01-10 03:12:44 TP0] RuntimeError: CUDA error at 0x7f3a10 (pid 4411)",
            "[2026-02-01 11:00:02 TP3] RuntimeError: CUDA error at 0x7e0000 (pid 98)",
            False,
        ),
        ("torch.OutOfMemoryError: CUDA out of memory.", "RuntimeError: NCCL error in ProcessGroupNCCL.cpp", True),
        ("torch.OutOfMemoryError: CUDA out of memory.", None, False),
    ],
)
def test_changed_failures_compare_root_causes_without_noise(
    before_line: str, after_line: str | None, changed: bool
) -> None:
    before, after = _sweeps()
    where = {"attention-backend": "triton"}
    _set(before, where, status=Status.FAIL, category=Category.CUDA_OOM, root_cause_line=before_line)
    _set(after, where, status=Status.FAIL, category=Category.CUDA_OOM, root_cause_line=after_line)
    assert bool(compare(view(before), view(after)).changed) is changed


def test_a_new_category_or_status_is_a_changed_failure() -> None:
    before, after = _sweeps()
    where = {"attention-backend": "triton"}
    _set(before, where, status=Status.FAIL, category=Category.CUDA_OOM)
    _set(after, where, status=Status.FAIL, category=Category.NAN_IN_PROBS)
    other = {"attention-backend": "nsa"}
    _set(before, other, status=Status.INVALID, category=Category.INVALID_ARGUMENT)
    _set(after, {"attention-backend": "dsa"}, status=Status.FAIL, category=Category.INVALID_ARGUMENT)
    changed = compare(view(before), view(after)).changed
    assert len(changed) == 2
    assert {(c.before.category, c.after.category) for c in changed if c.before and c.after} == {
        (Category.CUDA_OOM, Category.NAN_IN_PROBS),
        (Category.INVALID_ARGUMENT, Category.INVALID_ARGUMENT),
    }


def test_ready_time_changes_beyond_both_thresholds() -> None:
    before, after = _sweeps()
    cells = list(zip(before, after, strict=True))
    timings = [(30.0, 40.0), (30.0, 33.0), (2.0, 3.5), (60.0, 20.0)]
    before = [replace(b, ready_s=t[0]) for (b, _), t in zip(cells, timings, strict=True)]
    after = [replace(a, ready_s=t[1]) for (_, a), t in zip(cells, timings, strict=True)]
    result = compare(view(before), view(after))
    assert [(r.before_s, r.after_s) for r in result.ready_changes] == [(30.0, 40.0), (60.0, 20.0)]
    assert result.ready_changes[1].delta_s == -40.0
    loose = compare(view(before), view(after), min_abs_s=1.0)
    assert (2.0, 3.5) in [(r.before_s, r.after_s) for r in loose.ready_changes]


def test_added_and_removed_cells() -> None:
    before = matrix({"attention-backend": ["nsa", "fa3"]}, _all_pass)
    after = matrix({"attention-backend": ["dsa", "flashinfer"]}, _all_pass)
    result = compare(view(before), view(after))
    assert [c.flags["attention-backend"] for c in result.added] == ["flashinfer"]
    assert [c.flags["attention-backend"] for c in result.removed] == ["fa3"]
    assert result.to_dict()["added"][0]["before"] is None
    assert result.to_dict()["removed"][0]["after"] is None


def test_a_flag_added_to_every_cell_is_named_and_can_be_ignored() -> None:
    before, _ = _sweeps()
    after = matrix(AXES_0523, _all_pass, base={"enable-metrics": True})
    result = compare(view(before), view(after))
    assert len(result.added) == len(result.removed) == 4
    assert "enable-metrics" in result.notes[0]
    assert compare(view(before), view(after), ignore=["--enable-metrics"]).matched == 4


def test_two_installs_of_one_sweep_compare_on_flags_alone() -> None:
    stable = [replace(c, install="stable") for c in matrix(AXES_0523, _all_pass)]
    nightly = [replace(c, install="nightly") for c in matrix(AXES_0523, _all_pass)]
    nightly[0] = replace(nightly[0], status=OOM[0], phase=OOM[1], category=OOM[2], root_cause_line=OOM[3])
    parts = split_by_install(view(stable + nightly))
    assert set(parts) == {"stable", "nightly"} and parts["nightly"].sweep_id == "s1[nightly]"
    result = compare(parts["stable"], parts["nightly"])
    assert result.matched == 4 and len(result.regressions) == 1
    assert compare(parts["stable"], parts["nightly"], match_install=True).matched == 0


def test_compare_installs_names_a_missing_install() -> None:
    cells = [replace(c, install=i) for i in ("stable", "nightly") for c in matrix(AXES_0523, _all_pass)]
    assert compare_installs(view(cells), "stable", "nightly").matched == 4
    with pytest.raises(ValueError, match="no install canary"):
        compare_installs(view(cells), "stable", "canary")


def test_sweeps_with_an_install_axis_match_install_to_install() -> None:
    cells = [replace(c, install=i) for i in ("stable", "nightly") for c in matrix(AXES_0523, _all_pass)]
    later = list(cells)
    later[4] = replace(later[4], status=Status.FAIL, category=Category.CUDA_OOM)
    result = compare(view(cells), view(later))
    assert result.matched == 8
    assert [c.after.install for c in result.regressions if c.after] == ["nightly"]


def test_env_diff_covers_packages_host_and_host_facts() -> None:
    a = view([], packages={"torch": "2.9.1", "flashinfer-python": "0.5.3"}, host_facts={"driver": "580.65"})
    b = replace(
        view([], packages={"torch": "2.9.1", "sgl-kernel": "0.3.1"}, host_facts={"driver": "580.82", "torch": "x"}),
        host="gpu-host-2",
    )
    assert env_diff(a, b) == {
        "host": ("gpu-host", "gpu-host-2"),
        "driver": ("580.65", "580.82"),
        "flashinfer-python": ("0.5.3", None),
        "host.torch": (None, "x"),
        "sgl-kernel": (None, "0.3.1"),
    }


def test_failure_signature_masks_times_addresses_and_numbers() -> None:
    line = "[2026-01-10 03:12:44 TP0] CUDA error at 0x7f3a10 in tmp/3fa85f64c2b1 after 12 steps"
    assert failure_signature(line) == "CUDA error at <addr> in tmp/<id> after <n> steps"
    assert failure_signature(None) is None


def test_renderers_keep_the_contract_and_show_the_regression() -> None:
    before, after = _sweeps()
    _set(
        after,
        {"attention-backend": "triton", "dsa-decode-backend": "tilelang"},
        status=Status.FAIL,
        category=Category.NAN_IN_PROBS,
    )
    result = compare(view(before, version="0.5.9"), view(after, sweep_id="s2", version="0.5.23"))
    data = json.loads(render_comparison(result, "json"))
    assert set(data) >= CONTRACT
    entry = data["regressions"][0]
    assert {"cell_id", "flags", "before", "after"} <= set(entry)
    assert {"status", "category"} <= set(entry["before"]) and {"status", "category"} <= set(entry["after"])
    md = render_comparison(result, "md")
    assert "| attention-backend=triton, dsa-decode-backend=tilelang | pass | fail nan_in_probs |" in md
    assert "| sglang | 0.5.9 | 0.5.23 |" in md
    term = render_comparison(result, "term", width=120)
    assert "regressions (1)" in term and "0.5.23" in term
    with pytest.raises(ValueError, match="unknown format"):
        render_comparison(result, "html")


def test_changed_failures_show_both_root_causes_without_the_log_prefix() -> None:
    before, after = _sweeps()
    where = {"attention-backend": "triton", "dsa-decode-backend": "tilelang"}
    _set(
        before,
        {"attention-backend": "triton", "nsa-decode-backend": "tilelang"},
        status=Status.FAIL,
        category=Category.CUDA_OOM,
        root_cause_line=OOM[3],
    )
    _set(after, where, status=Status.FAIL, category=Category.NAN_IN_PROBS, root_cause_line=NAN_LINE)
    result = compare(view(before), view(after))
    md = render_comparison(result, "md")
    assert "| fail cuda_oom: torch.OutOfMemoryError: CUDA out of memory. | fail nan_in_probs: RuntimeError:" in md
    assert "2026-01-10" not in md
    assert "\x1b[" in render_comparison(result, "term", color=True)


def test_identical_sweeps_show_no_change() -> None:
    before, _ = _sweeps()
    result = compare(view(before), view(before))
    assert not any(result.to_dict()[k] for k in CONTRACT)
    assert "no change in the 4 matched cells" in render_comparison(result, "term")


def test_a_failure_whose_message_differs_only_by_the_nsa_dsa_rename_is_not_changed() -> None:
    """0.5.9 prints `nsa_backend.py` and NSA where 0.5.23 prints dsa: the same failure, not a changed one."""
    old = "[2026-12-02 10:00:00 TP0] ValueError: NSA models with an FP8 KV cache (nsa_kv_cache_store_fp8) fail"
    new = "[2026-12-03 10:00:00 TP0] ValueError: DSA models with an FP8 KV cache (dsa_kv_cache_store_fp8) fail"
    assert failure_signature(old) == failure_signature(new)
    # A real change of wording is still one; and NCCL (renamed only inside `nccl-init-addr`) is left alone.
    assert failure_signature(old) != failure_signature(new.replace("models", "layers"))
    assert "NCCL" in str(failure_signature("NCCL error: unhandled system error"))
    assert failure_signature("tensa nsa2") == "tensa nsa<n>"
    before, after = _sweeps()
    cell = {"attention-backend": "triton", "nsa-decode-backend": "tilelang"}
    _set(before, cell, status=OOM[0], phase=OOM[1], category=Category.UNSUPPORTED_CONFIG, root_cause_line=old)
    renamed = {"attention-backend": "triton", "dsa-decode-backend": "tilelang"}
    _set(after, renamed, status=OOM[0], phase=OOM[1], category=Category.UNSUPPORTED_CONFIG, root_cause_line=new)
    result = compare(view(before, version="0.5.9"), view(after, sweep_id="s2", version="0.5.23"))
    assert result.changed == () and result.regressions == () and result.matched == 4
