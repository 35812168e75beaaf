"""Typos stop things: an invalid cell fails `validate`, an all-invalid sweep fails, unchecked cells are not "ok"."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from orchestrator.cli import app
from orchestrator.matrix.flags import canonical_name, spellings
from orchestrator.matrix.shipped import shipped_grammar, shipped_versions
from tests.fault_harness import wait_for
from tests.paths import SGLANG_CAPTURES, require_fixtures
from tests.simhost import orchestrator, processes_under, write_hosts

require_fixtures()

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


def test_validate_without_a_host_checks_the_newest_shipped_release_and_says_the_host_decides(tmp_path: Path) -> None:
    result = invoke("validate", str(matrix(tmp_path, "triton, flashinfr")))
    assert result.exit_code == 1, result.output
    newest = shipped_versions()[0]
    assert f"checked against sglang {newest}, the newest release whose flags ship with orchestrator" in result.output
    assert f"1 valid, 1 invalid against sglang {newest}; 2 cells not checked against a host" in result.output
    assert "whose own `--help` decides" in result.output and "--host H" in result.output
    assert "did you mean flashinfer?" in result.output


def test_validate_without_a_host_catches_a_wrong_type_and_a_misspelled_flag(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: typos\nflags: {model-path: /models/m, tp-size: eight}\n"
        "matrix:\n  enable-dp-attenton: [true, false]\n"
    )
    result = invoke("validate", str(path), "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["checked_on_host"] is False and data["checked_against"].startswith(f"sglang {shipped_versions()[0]}")
    assert (data["valid"], data["invalid"]) == (0, 2)
    typo, wrong_type = (" ".join(c["problems"]) for c in data["cells"])
    assert "--enable-dp-attenton does not exist" in typo and "did you mean --enable-dp-attention?" in typo
    # `false` leaves the misspelled flag out, so SGLang's argparse gets as far as the value's type.
    assert "argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'" in wrong_type
    assert f"error: {path}: 2 of 2 cells invalid" in result.stderr


def test_a_flag_only_an_older_shipped_release_has_is_valid_with_a_note(tmp_path: Path) -> None:
    newest, *older = shipped_versions()
    oldest, latest = shipped_grammar(older[-1]), shipped_grammar(newest)
    gone = next(
        spec.primary
        for spec in oldest.flags
        # Not one the tool renames across releases (nsa -> dsa): that one the newest release takes, renamed.
        if not spec.takes_value and all(latest.lookup(n) is None for n in spellings(canonical_name(spec.primary)))
    )
    path = tmp_path / "m.yaml"
    path.write_text(f"name: old\nflags: {{model-path: /models/m}}\nmatrix:\n  {gone[2:]}: [true]\n")
    result = invoke("validate", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    (cell,) = json.loads(result.stdout)["cells"]
    assert cell["ok"] and any(f"not in {newest}" in note and gone in note for note in cell["notes"]), cell


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
    assert f"{path}:4: attention-backend: flashinfr, trition: 2 invalid cells" in result.stderr  # the line to edit
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


def test_invalid_cells_name_the_lines_to_edit(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: typos\n"
        "flags: {model-path: /models/m, tp-size: eight}\n"  # line 2: every cell's wrong type
        "matrix:\n"
        "  attention-backend:\n"
        "    - triton\n"
        "    - flashinfr\n"  # line 6: one cell's bad value
        "  enable-dp-attenton: [true, false]\n"  # line 7: a misspelled flag
    )
    result = invoke("validate", str(path), "--format", "json")
    assert result.exit_code == 1
    assert f"{path}:6: attention-backend: flashinfr" in result.stderr, result.stderr
    assert f"{path}:7: enable-dp-attenton" in result.stderr
    assert f"{path}:2: tp-size" in result.stderr
    assert "did you mean --attention-backend" not in result.stderr  # a flag the reason suggests is not a place
    where = {w["line"] for c in json.loads(result.stdout)["cells"] for w in c["where"]}
    assert where == {2, 6, 7}
    assert f"error: {path}: 4 of 4 cells invalid" in result.stderr


def test_a_missing_help_file_says_how_to_make_one(tmp_path: Path) -> None:
    result = invoke("validate", str(matrix(tmp_path, "triton")), "--against", str(tmp_path / "help.txt"))
    assert result.exit_code == 1 and "No such file or directory" in result.output
    assert "fix: give --against a saved `python -m sglang.launch_server --help > FILE`" in result.output


def test_a_tp_size_below_one_is_invalid_before_launch(tmp_path: Path) -> None:
    # argparse takes any int; a server given --tp-size 0 or -1 fails at startup, after the GPUs were booked.
    path = tmp_path / "m.yaml"
    path.write_text("name: t\nflags: {model-path: /m}\nmatrix:\n  tp-size: [0, -1, 2]\n")
    data = json.loads(invoke("validate", str(path), "--format", "json").stdout)
    assert [c["ok"] for c in data["cells"]] == [False, False, True]
    assert "tp-size 0 is below 1" in " ".join(data["cells"][0]["problems"])
