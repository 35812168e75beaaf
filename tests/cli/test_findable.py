"""What a user looks for: the version, run ids from the table (or SWEEP:CELL), and scripts/test's own help."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import orchestrator
from orchestrator.cli import app
from orchestrator.matrix.shipped import shipped_versions
from orchestrator.store import Store
from tests.paths import REPO
from tests.store.test_latest import NIGHT, morning


def test_version_names_the_tool_python_and_the_sglang_releases_it_knows() -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrator", "--version"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith(f"orchestrator {orchestrator.__version__} (python {sys.version.split()[0]}")
    assert line.endswith(f"SGLang flags known: {', '.join(shipped_versions())})")
    assert CliRunner().invoke(app, ["-V"]).output.strip() == line


def test_the_table_shows_run_ids_and_bugreport_takes_sweep_colon_cell(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    morning(db).close()
    with Store(db) as store:
        shown = {r.cell.cell_id: r.run_id for r in store.cell_results(NIGHT)}
    table = CliRunner().invoke(app, ["table", NIGHT, "--db", str(db)])
    assert table.exit_code == 0, table.output
    header = next(line for line in table.output.splitlines() if line.startswith("attention-backend"))
    assert re.split(r"\s{2,}", header)[5] == "run"
    for run_id in shown.values():
        assert run_id is not None and run_id in table.output
    by_cell = CliRunner().invoke(app, ["bugreport", f"{NIGHT}:c-flashinfer", "--db", str(db)])
    by_run = CliRunner().invoke(app, ["bugreport", str(shown["c-flashinfer-fp8_e4m3"]), "--db", str(db)])
    assert by_cell.exit_code == 0 and by_cell.output == by_run.output, by_cell.output
    wrong = CliRunner().invoke(app, ["bugreport", f"{NIGHT}:c-nope", "--db", str(db)])
    assert wrong.exit_code == 1 and "matches none of sweep" in wrong.output and "-f csv" in wrong.output


def test_scripts_test_help_prints_its_usage_and_installs_nothing(tmp_path: Path) -> None:
    # A copy beside no setup script and no venv: anything past the help would fail or create files.
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "test", tmp_path / "scripts" / "test")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for flag in ("--help", "-h"):
        done = subprocess.run(
            ["bash", str(tmp_path / "scripts" / "test"), flag],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={"PATH": os.defpath},
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: scripts/test [PYTEST ARGS...]") and done.stderr == ""
        assert "pytest --help" in done.stdout
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_report_takes_format_as_table_does(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    morning(db).close()
    md = CliRunner().invoke(app, ["report", NIGHT, "--md", "--db", str(db)])
    spelled = CliRunner().invoke(app, ["report", NIGHT, "-f", "md", "--db", str(db)])
    assert md.exit_code == 0 and spelled.output == md.output
    done = CliRunner().invoke(app, ["report", "--format", "json", "--compare", NIGHT, "--db", str(db)])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["table"]["sweep_id"] == NIGHT and len(data["table"]["cells"]) == 3
    assert data["explain"]["sweep_id"] == NIGHT and data["compare"]["regressions"] == []
    alone = json.loads(CliRunner().invoke(app, ["report", "-f", "json", "--db", str(db)]).stdout)
    assert alone["compare"] is None and alone["table"] == data["table"]
