"""The night's sweep stays "the latest" after a morning of one-cell runs, repros and typo sweeps; `sweeps` lists all.

Real sweeps on the simulated host (the CLI in a child process, as a user runs it): a two-cell sweep, an
`orchestrator run`, a repro of the night's failing run and a sweep whose every cell is invalid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.simhost import orchestrator, run_json, write_hosts

MATRIX = """name: night
flags: {{model-path: /models/m, tp-size: 1}}
matrix:
  attention-backend: [{backends}]
probes: {{settle_s: 0.1, concurrent_requests: 2}}
"""


def sweep_id_of(stdout: str) -> str:
    return stdout.rsplit("sweep ", 1)[1].split()[0]


@pytest.fixture(scope="module")
def morning(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("morning")
    hosts = write_hosts(tmp / "hosts.yaml", tmp / "work")
    db = tmp / "o.db"
    night_matrix = tmp / "night.yaml"
    night_matrix.write_text(MATRIX.format(backends="triton, flashinfer"))
    night = orchestrator("sweep", str(night_matrix), "--host", "simhost", "--hosts", str(hosts), db=db)
    assert night.returncode == 0, night.stdout + night.stderr
    night_id = sweep_id_of(night.stdout)
    failing = json.loads(orchestrator("table", night_id, "-f", "json", db=db).stdout)["cells"]
    cell_id, run_id = next((c["cell_id"], c["run_id"]) for c in failing if c["status"] == "fail")
    one = run_json(
        orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", "--model-path", "/m", db=db)
    )
    # Named as the table's row: the night's sweep and a prefix of the cell's id.
    repro = orchestrator("repro", f"{night_id}:{cell_id[:5]}", "--hosts", str(hosts), db=db)
    assert "Traceback" not in repro.stderr, repro.stderr
    typo = tmp / "typo.yaml"
    typo.write_text(MATRIX.format(backends="flashinfr, trition"))
    invalid = orchestrator("sweep", str(typo), "--host", "simhost", "--hosts", str(hosts), db=db)
    assert invalid.returncode == 1 and "every cell is invalid" in invalid.stderr, invalid.stderr
    # Nothing launched: no Ctrl-C or --resume to offer.
    assert "no cell to launch" in invalid.stdout and "--resume" not in invalid.stdout, invalid.stdout
    return {"db": db, "night": night_id, "run": one["sweep_id"], "failing_run": run_id}


def test_table_explain_and_report_still_show_the_night(morning: dict[str, Any], tmp_path: Path) -> None:
    db, night = morning["db"], morning["night"]
    table = orchestrator("table", "-f", "json", db=db)
    assert table.returncode == 0 and json.loads(table.stdout)["sweep_id"] == night, table.stdout + table.stderr
    term = orchestrator("table", db=db)
    assert f"night · {night}" in term.stdout
    assert "newer (one-cell runs, repros, or sweeps that launched nothing): `orchestrator sweeps`" in term.stdout
    explain = json.loads(orchestrator("explain", "-f", "json", db=db).stdout)
    assert explain["sweep_id"] == night
    page = tmp_path / "r.html"
    report = orchestrator("report", "--html", str(page), db=db)
    assert report.returncode == 0 and f"of {night}" in report.stderr + report.stdout


def test_sweeps_lists_every_sweep_with_its_counts_and_the_latest(morning: dict[str, Any]) -> None:
    db, night = morning["db"], morning["night"]
    listed = orchestrator("sweeps", "--format", "json", db=db)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["latest"] == night
    kinds = [(s["kind"], s["launched"] > 0) for s in data["sweeps"]]
    assert kinds == [("sweep", False), ("repro", True), ("run", True), ("sweep", True)]
    first = data["sweeps"][-1]
    assert (first["sweep_id"], first["cells"], first["pass"] + first["fail"], first["host"]) == (night, 2, 2, "simhost")
    assert first["matrix_path"].endswith("night.yaml") and first["latest"]
    assert data["sweeps"][0]["counts"] == {"invalid": 2}
    term = orchestrator("sweeps", db=db)
    rows = {line.split()[0]: line for line in term.stdout.splitlines() if line.startswith("s-")}
    assert len(rows) == 4 and rows[night].rstrip().endswith("latest")
    assert "launched nothing" in rows[data["sweeps"][0]["sweep_id"]]
    assert "one-cell orchestrator run" in rows[morning["run"]]
    assert f"repro of {morning['failing_run']}" in rows[data["sweeps"][1]["sweep_id"]]
    # `table --list` is the same list; csv and md are one row per sweep.
    assert orchestrator("table", "--list", db=db).stdout == term.stdout
    assert len(orchestrator("sweeps", "-f", "csv", db=db).stdout.splitlines()) == 5
    assert len(orchestrator("table", "--list", "-f", "md", db=db).stdout.splitlines()) == 6


def test_sweeps_of_a_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    done = orchestrator("sweeps", db=tmp_path / "none.db")
    assert done.returncode == 1 and "no store at" in done.stderr and "Traceback" not in done.stderr
