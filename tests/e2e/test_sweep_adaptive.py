"""`sweep --strategy adaptive` end to end on the simulated host: a 648-cell matrix with one two-flag interaction
and one single-flag failure is explained, both causes confirmed, from under a tenth of its cells; a sweep stopped
by its budget says what is left, and its resume continues the same plan without relaunching a cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import Store
from tests.paths import REPO
from tests.simhost import orchestrator, processes_under, write_hosts

DATA = REPO / "tests" / "data" / "adaptive"
MATRIX = DATA / "matrix.yaml"
PAIR = {"attention-backend": ["triton"], "kv-cache-dtype": ["fp8_e4m3"]}
SINGLE = {"fp8-gemm-backend": ["deep_gemm"]}


def expected(flags: dict[str, Any]) -> tuple[str, str, str]:
    """The scenario's verdict for one cell (tests/data/adaptive/scenario.yaml); the earlier phase wins."""
    if flags["fp8-gemm-backend"] == "deep_gemm":
        return "fail", "cuda_graph_capture", "kernel_not_supported_on_arch"
    if flags["attention-backend"] == "triton" and flags["kv-cache-dtype"] == "fp8_e4m3":
        return "fail", "sampled_decode", "nan_in_probs"
    return "pass", "after_decode", "healthy"


def _sweep(tmp: Path, db: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    hosts = write_hosts(tmp / "hosts.yaml", tmp / "work", scenario=DATA / "scenario.yaml")
    out = tmp / f"table-{len(list(tmp.glob('table-*.json')))}.json"
    result = orchestrator(
        "sweep", str(MATRIX), "--host", "simhost", "--hosts", str(hosts), "--json-out", str(out), *extra,
        db=db, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result.stdout, json.loads(out.read_text())


def _explain(db: Path, sweep_id: str) -> dict[str, Any]:
    result = orchestrator("explain", sweep_id, "--format", "json", db=db)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _first(explanation: dict[str, Any], category: str) -> dict[str, Any]:
    found = [f for f in explanation["findings"] if f["category"] == category]
    assert found, explanation
    first: dict[str, Any] = found[0]
    return first


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("adaptive")
    db = tmp / "o.db"
    stdout, table = _sweep(tmp, db)
    assert processes_under(tmp / "work") == []
    return stdout, table, db


def test_a_tenth_of_the_cells_explains_both_faults(adaptive: tuple[str, dict[str, Any], Path]) -> None:
    stdout, table, db = adaptive
    assert "strategy adaptive (the default for this size)" in stdout
    assert table["strategy"] == "adaptive" and table["matrix_cells"] == 648
    cells = table["cells"]
    assert 15 <= len(cells) <= 64, len(cells)
    for cell in cells:
        assert (cell["status"], cell["phase"], cell["category"]) == expected(cell["flags"]), cell
    assert {c["category"] for c in cells} == {"healthy", "nan_in_probs", "kernel_not_supported_on_arch"}
    assert f"{648 - len(cells)} of 648 cells not run" in stdout
    assert "every failure seen has a confirmed cause" in stdout
    assert "--strategy full --resume" in stdout
    sweep_id = table["sweep_id"]
    explanation = _explain(db, sweep_id)
    pair, single = _first(explanation, "nan_in_probs"), _first(explanation, "kernel_not_supported_on_arch")
    assert pair["flags"] == PAIR and pair["kind"] == "flags" and pair["confirmed"] is True
    assert single["flags"] == SINGLE and single["confirmed"] is True
    for group in explanation["categories"]:
        assert group["candidates_left"] == []
    term = orchestrator("explain", sweep_id, db=db).stdout
    assert "attention-backend=triton and kv-cache-dtype=fp8_e4m3 (confirmed)" in term


def test_resuming_a_finished_adaptive_sweep_launches_nothing(
    adaptive: tuple[str, dict[str, Any], Path], tmp_path: Path
) -> None:
    _, table, db = adaptive
    with Store(db) as store:
        sweep_id = store.latest_sweep().sweep_id  # type: ignore[union-attr]
        before = len(store.runs(sweep_id))
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=DATA / "scenario.yaml")
    result = orchestrator(
        "sweep", str(MATRIX), "--host", "simhost", "--hosts", str(hosts), "--resume", sweep_id, db=db, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with Store(db) as store:
        assert len(store.runs(sweep_id)) == before
        assert len(store.get_cells(sweep_id)) == len(table["cells"])


def test_budget_stops_honestly_and_resume_continues_the_same_plan(
    adaptive: tuple[str, dict[str, Any], Path], tmp_path: Path
) -> None:
    _, whole, _ = adaptive
    db = tmp_path / "budget.db"
    stdout, cut = _sweep(tmp_path, db, "--strategy", "adaptive", "--budget", "17")
    assert len(cut["cells"]) == 17
    assert "budget of 17: the budget of launched cells ran out" in stdout
    with Store(db) as store:
        sweep_id = store.latest_sweep().sweep_id  # type: ignore[union-attr]
    explanation = _explain(db, sweep_id)
    left = [g for g in explanation["categories"] if g["candidates_left"]]
    assert left, explanation
    assert any("budget of launched cells ran out" in n for g in left for n in g["notes"])
    assert not any(f["confirmed"] for f in explanation["findings"] if f["category"] in {g["category"] for g in left})
    _, resumed = _sweep(tmp_path, db, "--resume", sweep_id, "--budget", "64")
    assert {c["cell_id"] for c in resumed["cells"]} == {c["cell_id"] for c in whole["cells"]}
    assert all(c["runs"] == 1 for c in resumed["cells"]), [c for c in resumed["cells"] if c["runs"] != 1]
    explanation = _explain(db, sweep_id)
    assert _first(explanation, "nan_in_probs")["confirmed"] and _first(explanation, "nan_in_probs")["flags"] == PAIR
    assert processes_under(tmp_path / "work") == []


def test_strategy_full_resume_fills_in_the_rest_without_rerunning(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=DATA / "known-bad-scenario.yaml")
    db = tmp_path / "o.db"
    args = ("sweep", str(DATA / "known-bad-matrix.yaml"), "--host", "simhost", "--hosts", str(hosts))
    first = orchestrator(*args, "--strategy", "adaptive", "--json-out", str(tmp_path / "a.json"), db=db, timeout=300)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    cut = json.loads((tmp_path / "a.json").read_text())
    assert cut["strategy"] == "adaptive" and len(cut["cells"]) < 12
    assert f"{12 - len(cut['cells'])} of 12 cells not run" in first.stdout
    sweep_id = cut["sweep_id"]
    refused = orchestrator(*args, "--strategy", "full", "--resume", sweep_id, "--max-hours", "0", db=db, timeout=300)
    assert refused.returncode != 0 and "not started" in refused.stderr, refused.stdout[-2000:] + refused.stderr
    assert f"launches {12 - len(cut['cells'])} cells" in refused.stdout
    with Store(db) as store:
        assert len(store.get_cells(sweep_id)) == len(cut["cells"])
        assert store.get_sweep(sweep_id).settings["strategy"] == "adaptive"
        assert store.get_sweep(sweep_id).status == "done"
    more = orchestrator(
        *args, "--strategy", "full", "--resume", sweep_id, "--json-out", str(tmp_path / "b.json"), db=db, timeout=300
    )
    assert more.returncode == 0, more.stdout[-3000:] + more.stderr[-2000:]
    whole = json.loads((tmp_path / "b.json").read_text())
    assert whole["strategy"] == "full" and len(whole["cells"]) == 12 and "cells not run" not in more.stdout
    before = {c["cell_id"]: c["run_id"] for c in cut["cells"]}
    after = {c["cell_id"]: c for c in whole["cells"]}
    assert all(after[i]["run_id"] == run_id and after[i]["runs"] == 1 for i, run_id in before.items())
    with Store(db) as store:
        origins = store.cell_origins(sweep_id)
    assert {origins[i] for i in after if i not in before} == {"fill"}
    assert processes_under(tmp_path / "work") == []
