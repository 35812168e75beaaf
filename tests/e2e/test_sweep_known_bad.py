"""Known-bad cells: the same matrix swept twice on one store skips exactly the cells the first sweep proved
kernel_not_supported_on_arch, citing that sweep and run; crashes and passes run again; --retry-known-bad runs all."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.paths import REPO
from tests.simhost import orchestrator, processes_under, write_hosts

DATA = REPO / "tests" / "data" / "adaptive"


def _sweep(tmp: Path, db: Path, name: str, *extra: str) -> tuple[str, dict[str, Any]]:
    hosts = write_hosts(tmp / "hosts.yaml", tmp / "work", scenario=DATA / "known-bad-scenario.yaml")
    out = tmp / f"{name}.json"
    result = orchestrator(
        "sweep", str(DATA / "known-bad-matrix.yaml"), "--host", "simhost", "--hosts", str(hosts),
        "--json-out", str(out), *extra, db=db, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result.stdout, json.loads(out.read_text())


def test_second_sweep_skips_exactly_the_proven_cells(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    _, first = _sweep(tmp_path, db, "first")
    assert first["strategy"] == "full" and len(first["cells"]) == 12
    proven = {c["cell_id"]: c["run_id"] for c in first["cells"] if c["category"] == "kernel_not_supported_on_arch"}
    crashed = {c["cell_id"] for c in first["cells"] if c["category"] == "illegal_memory_access"}
    assert len(proven) == 4 and len(crashed) == 2
    assert all(c["flags"]["dsa-decode-backend"] == "fa3" for c in first["cells"] if c["cell_id"] in proven)

    hosts = tmp_path / "hosts.yaml"
    checked = orchestrator(
        "validate", str(DATA / "known-bad-matrix.yaml"), "--host", "simhost", "--hosts", str(hosts), db=db
    )
    assert checked.returncode == 0, checked.stderr
    assert re.search(r"launches 8 cells, .*from past runs \(12\)\); 4 known bad from past sweeps", checked.stdout)

    stdout, second = _sweep(tmp_path, db, "second")
    skipped = {c["cell_id"]: c for c in second["cells"] if c["status"] == "skipped"}
    assert set(skipped) == set(proven)
    for cell_id, cell in skipped.items():
        assert cell["reason"] == (
            f"known bad: sweep {first['sweep_id']} run {proven[cell_id]}, kernel_not_supported_on_arch"
        )
        assert cell["category"] == "kernel_not_supported_on_arch"
    launched = [c for c in second["cells"] if c["status"] != "skipped"]
    assert len(launched) == 8
    assert all(c["run_id"] not in {x["run_id"] for x in first["cells"]} for c in launched)
    assert {c["cell_id"] for c in launched if c["category"] == "illegal_memory_access"} == crashed
    assert "4 cells skipped as known bad" in stdout
    plan = r"plan: 12 cells; strategy full .*launches 8 cells, .*from past runs \(12\)\).*4 known bad"
    assert re.search(plan, stdout)

    _, third = _sweep(tmp_path, db, "third", "--retry-known-bad")
    assert not [c for c in third["cells"] if c["status"] == "skipped"]
    assert {c["cell_id"] for c in third["cells"] if c["category"] == "kernel_not_supported_on_arch"} == set(proven)
    assert processes_under(tmp_path / "work") == []
