"""`sweep --strategy pairwise` on the simulated host: a covering subset runs, every verdict right, the rest named."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

from orchestrator.store import Store
from tests.e2e.test_demo_sweep import expected
from tests.paths import REPO
from tests.simhost import orchestrator, processes_under, write_hosts

AXES = ("attention-backend", "dsa-decode-backend", "kv-cache-dtype", "fp8-gemm-backend")


def test_pairwise_runs_a_covering_subset_with_right_verdicts(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work")
    db = tmp_path / "o.db"
    result = orchestrator(
        "sweep", str(REPO / "configs" / "glm5-nvfp4-sm120.yaml"), "--host", "simhost", "--hosts", str(hosts),
        "--strategy", "pairwise", "--json-out", str(tmp_path / "t.json"), db=db, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["strategy"] == "pairwise" and data["matrix_cells"] == 30
    cells = data["cells"]
    assert 6 <= len(cells) < 30
    assert f"{30 - len(cells)} of 30 cells not run" in result.stdout
    for cell in cells:
        assert (cell["status"], cell["phase"], cell["category"]) == expected(cell["flags"])
    with Store(db) as store:
        full = store.get_cells(store.latest_sweep().sweep_id)  # type: ignore[union-attr]
    assert len(full) == len(cells)
    ran = [{a: str(c["flags"].get(a)) for a in AXES} for c in cells]
    for first, second in combinations(AXES, 2):
        seen = {(r[first], r[second]) for r in ran}
        assert len(seen) >= 2
    assert processes_under(tmp_path / "work") == []
