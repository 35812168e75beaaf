"""Typos stop things: an invalid cell fails `validate`, an all-invalid sweep fails, unchecked cells are not "ok"."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from orchestrator.cli import app
from tests.fault_harness import wait_for
from tests.paths import SGLANG_CAPTURES
from tests.simhost import orchestrator, processes_under, write_hosts

HELP_059 = SGLANG_CAPTURES / "0.5.9" / "help.txt"
MATRIX = """name: typos
flags: {{model-path: /models/m, tp-size: 1}}
matrix:
  attention-backend: [{backends}]
probes: {{settle_s: 0.1, concurrent_requests: 2}}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def matrix(tmp_path: Path, backends: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(backends=backends))
    return path


def test_validate_exits_1_when_a_cell_is_invalid(tmp_path: Path) -> None:
    path = matrix(tmp_path, "triton, flashinfr")
    result = invoke("validate", str(path), "--against", str(HELP_059))
    assert result.exit_code == 1, result.output
    assert "1 valid, 1 invalid" in result.output and "flashinfr" in result.output
    assert f"error: {path}: 1 of 2 cells invalid" in result.output
    # --strict, once needed for this, is still accepted; a clean matrix still exits 0.
    assert invoke("validate", str(path), "--against", str(HELP_059), "--strict").exit_code == 1
    clean = invoke("validate", str(matrix(tmp_path, "triton, flashinfer")), "--against", str(HELP_059))
    assert clean.exit_code == 0 and "2 valid, 0 invalid" in clean.output, clean.output


def test_validate_without_a_host_says_nothing_was_checked(tmp_path: Path) -> None:
    result = invoke("validate", str(matrix(tmp_path, "triton, flashinfr")))
    assert result.exit_code == 0, result.output
    assert "not checked against a host" in result.output and "--host H" in result.output
    assert " ok" not in result.output and "valid" not in result.output.replace("invalid", "")
    assert result.output.count("not checked") >= 3  # the title, each of the two cells, the summary


def test_a_sweep_whose_every_cell_is_invalid_exits_non_zero(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work")
    path = matrix(tmp_path, "flashinfr, trition")
    db = tmp_path / "o.db"
    out = tmp_path / "t.json"
    result = orchestrator(
        "sweep", str(path), "--host", "simhost", "--hosts", str(hosts), "--json-out", str(out), db=db
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"error: {path}: every cell is invalid" in result.stderr
    assert "Traceback" not in result.stderr
    cells = json.loads(out.read_text())["cells"]
    assert [c["status"] for c in cells] == ["invalid", "invalid"]
    # Nothing launched, nothing left (a `--help` query of preflight may take a moment to end on its own).
    wait_for(lambda: processes_under(tmp_path / "work") == [], 20, "no process of the sweep left")
    assert not list((tmp_path / "work").glob("runs/*/pid"))
    # One valid cell is a finished sweep again (exit 0), invalid cells and all.
    mixed = orchestrator("sweep", str(matrix(tmp_path, "triton, trition")), "--host", "simhost", "--hosts",
                         str(hosts), db=db)  # fmt: skip
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
