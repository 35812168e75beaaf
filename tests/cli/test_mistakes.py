"""Common mistakes end in one line naming the file and the fix, exit 1, before any work: never a traceback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from orchestrator.cli import app
from orchestrator.model import Category, Phase, ProbeOutcome, Status, Verdict
from orchestrator.store import Store
from tests.paths import REPO
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

SWEEP = make_sweep()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def fill(db: Path, verdict: Verdict | None = None, outcome: ProbeOutcome | None = None) -> str:
    """A one-cell sweep without installs, its one run finished with `verdict` (a failure by default): its run id."""
    with Store(db) as store:
        store.create_sweep(SWEEP)
        cell = make_cell()
        store.save_cells(SWEEP.sweep_id, [cell])
        run = make_run(cell)
        store.create_run(run)
        store.finish_run(run.run_id, outcome or make_outcome(), None, verdict or make_verdict(), {})
    return run.run_id


def one_clear_line(result: Result, *needles: str) -> str:
    """The error as the user sees it: exit 1, no traceback, one line holding every needle and a fix."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output and "fix" in lines[0], lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A real read-only filesystem (a tmpfs remounted ro) holding a store; skipped where mounting is not allowed."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fill(mount / "o.db")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, capture_output=True)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False, capture_output=True)


def test_report_html_into_a_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "night.html"
    # Checked before the store is even opened: this store does not exist either.
    line = one_clear_line(invoke("report", "--html", str(target), "--db", str(tmp_path / "none.db")), str(target))
    assert "does not exist" in line and not target.parent.exists()


def test_report_html_into_a_read_only_folder_and_a_store_on_a_read_only_filesystem(
    read_only_dir: Path, tmp_path: Path
) -> None:
    db = read_only_dir / "o.db"
    line = one_clear_line(invoke("report", "--html", str(read_only_dir / "x.html"), "--db", str(db)), "x.html")
    assert "read-only" in line
    # The store itself can be read where it lies: table, explain and a report written elsewhere all work.
    table = invoke("table", "--db", str(db), "--format", "json")
    assert table.exit_code == 0 and SWEEP.sweep_id in table.output, table.output
    assert invoke("explain", "--db", str(db)).exit_code == 0
    page = tmp_path / "night.html"
    assert invoke("report", "--html", str(page), "--db", str(db)).exit_code == 0 and page.stat().st_size > 1000
    # Writing to it is refused up front, naming the file and the fix, before any host is contacted.
    sweep = invoke("sweep", str(REPO / "configs" / "glm5-nvfp4-sm120.yaml"), "--host", "sim", "--db", str(db))
    assert "read-only" in one_clear_line(sweep, str(db), "--db")


def test_compare_installs_on_a_sweep_without_installs(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    fill(db)
    line = one_clear_line(invoke("compare", SWEEP.sweep_id, "--installs", "before,after", "--db", str(db)), str(db))
    assert "has no installs" in line and "orchestrator compare OLD NEW" in line


def test_sweep_json_out_into_a_missing_folder_is_refused_before_the_sweep(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "t.json"
    db = tmp_path / "o.db"
    matrix = str(REPO / "configs" / "glm5-nvfp4-sm120.yaml")
    result = invoke("sweep", matrix, "--host", "sim", "--db", str(db), "--json-out", str(target))
    one_clear_line(result, str(target), "--json-out")
    assert not db.exists()


HOSTS_BOX = "box:\n  ssh: me@gpu-box:22\n  launcher: /x -m sglang.launch_server\n  gpus: 8\n  workdir: /w\n"
MATRIX_NOSUCH = "name: t\nhost: nosuch\nflags: {model-path: /m, tp-size: 8}\nmatrix:\n  attention-backend: [triton]\n"


def test_sweep_of_a_matrix_whose_host_is_not_in_hosts_yaml_names_the_matrix_line(tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text(HOSTS_BOX)
    (tmp_path / "m.yaml").write_text(MATRIX_NOSUCH)
    hosts, matrix, db = tmp_path / "hosts.yaml", tmp_path / "m.yaml", tmp_path / "o.db"
    result = invoke("sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), "--yes")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{matrix}:2: host 'nosuch'" in result.output and "hosts.yaml has: box" in result.output
    assert "host: box" in result.output  # the fix names what to write
    assert not db.exists()  # nothing started


def test_validate_warns_of_a_matrix_host_that_is_not_in_hosts_yaml(tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text(HOSTS_BOX)
    (tmp_path / "m.yaml").write_text(MATRIX_NOSUCH)
    result = invoke("validate", str(tmp_path / "m.yaml"), "--hosts", str(tmp_path / "hosts.yaml"))
    assert result.exit_code == 0, result.output  # the flags are valid; the host is the sweep's concern
    assert f"{tmp_path / 'm.yaml'}:2: host 'nosuch'" in result.output
    assert "sweep` without --host would stop" in result.output
    (tmp_path / "m.yaml").write_text(MATRIX_NOSUCH.replace("nosuch", "box"))
    ok = invoke("validate", str(tmp_path / "m.yaml"), "--hosts", str(tmp_path / "hosts.yaml"))
    assert ok.exit_code == 0 and "host 'box'" not in ok.output


def test_sweep_of_a_matrix_without_host_and_without_host_option_names_the_matrix(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: t\nflags: {model-path: /m}\nmatrix:\n  attention-backend: [triton]\n")
    result = invoke("sweep", str(matrix), "--db", str(tmp_path / "o.db"), "--yes")
    assert result.exit_code == 1 and "<config>" not in result.output, result.output
    assert f"error: {matrix}: no host given" in result.output
    assert "add `host: NAME` to it" in result.output and "--host sim" in result.output


def test_run_without_flags_says_what_to_give_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    result = invoke("run", "--db", str(db))
    assert result.exit_code == 1, result.output
    assert not isinstance(result.exception, IndexError) and "Traceback" not in result.output
    assert "error: no SGLang flags after `--`" in result.output and "orchestrator run -- --model-path" in result.output
    assert not db.exists()


@pytest.mark.parametrize("command", [["table"], ["sweeps"], ["explain"], ["run", "--", "--model-path", "/m"]])
def test_a_store_path_that_is_a_folder_says_so(tmp_path: Path, command: list[str]) -> None:
    result = invoke(*command[:1], "--db", str(tmp_path), *command[1:])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"error: the store {tmp_path} is a folder" in result.output, result.output
    assert f"--db {tmp_path / 'orchestrator.db'}" in result.output


def test_bugreport_of_a_cell_rejected_before_launch_is_refused(tmp_path: Path) -> None:
    # A flag the tool's own check rejected (a typo in the matrix) is the user's to fix, not an SGLang issue.
    db = tmp_path / "o.db"
    typo = make_verdict(Status.INVALID, phase=Phase.PREFLIGHT, category=Category.INVALID_ARGUMENT)
    run_id = fill(db, typo, make_outcome(None))
    line = one_clear_line(invoke("bugreport", run_id, "--db", str(db)), f"run {run_id} was rejected")
    assert "orchestrator validate" in line


def test_a_missing_or_broken_scenario_is_named_before_the_host_is_asked(tmp_path: Path) -> None:
    # The host's preflight saw only "SGLang does not say its version" and advised fixing hosts.yaml's launcher.
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: t\nhost: sim\nflags: {model-path: /m}\nmatrix:\n  attention-backend: [triton]\n")
    db = tmp_path / "o.db"
    missing = tmp_path / "nope.yaml"
    result = invoke("sweep", str(matrix), "--scenario", str(missing), "--db", str(db), "--yes")
    assert result.exit_code == 1 and f"error: {missing}: --scenario names a file that does not exist" in result.output
    broken = tmp_path / "sc.yaml"
    broken.write_text("version: 0.5.9\nrules:\n  - when: {attention-backend: triton}\n    fail: {at: model_lod}\n")
    result = invoke("sweep", str(matrix), "--scenario", str(broken), "--db", str(db), "--yes")
    assert result.exit_code == 1 and f"{broken}:4: rules[0].fail.at: unknown phase 'model_lod'" in result.output
    assert "launcher" not in result.output and not db.exists()
