"""What a refused sweep says about the earlier sweep whose servers hold the GPUs."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli.sweep_resume import earlier_sweeps
from orchestrator.store import Store
from tests.store.test_records import make_cell, make_run, make_sweep

SWEEP = "s-20261202-153012-ab12"


def _resume(sweep_id: str, matrix: Path | None) -> str:
    return f"orchestrator sweep {matrix} --resume {sweep_id}"


def _two_runs(store: Store) -> tuple[str, str]:
    store.create_sweep(make_sweep(SWEEP))
    cells = [make_cell("triton"), make_cell("flashinfer")]
    store.save_cells(SWEEP, cells)
    recorded, unrecorded = make_run(cells[0]), make_run(cells[1])
    for run in (recorded, unrecorded):
        store.create_run(run)
    store.mark_launched(recorded.run_id, "/tmp/runs/" + recorded.run_id, 4242, 30000, [0])
    return recorded.run_id, unrecorded.run_id  # the second: killed before the store recorded its launch


def test_the_kill_advice_covers_a_server_whose_launch_the_store_never_recorded(tmp_path: Path) -> None:
    with Store(tmp_path / "o.db") as store:
        recorded, unrecorded = _two_runs(store)
        text = earlier_sweeps(store, (recorded, unrecorded), _resume, {unrecorded: 5151})
    assert f"They are servers of sweep {SWEEP} (" in text and f"runs {recorded}, {unrecorded}" in text, text
    assert f"--resume {SWEEP}" in text, text
    assert "`kill -TERM -- -4242 -5151`" in text, text


def test_without_any_process_group_only_the_resume_is_offered(tmp_path: Path) -> None:
    with Store(tmp_path / "o.db") as store:
        _, unrecorded = _two_runs(store)
        text = earlier_sweeps(store, (unrecorded, "r-0000000000"), _resume)
    assert f"--resume {SWEEP}" in text and "kill" not in text, text
    assert "Runs r-0000000000 are not in" in text, text


def _stored_sweep(db: Path) -> None:
    with Store(db) as store:
        store.create_sweep(make_sweep(SWEEP))
        store.save_cells(SWEEP, [make_cell("triton"), make_cell("flashinfer")])


def test_resuming_with_another_matrix_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from orchestrator.cli import app

    db = tmp_path / "o.db"
    _stored_sweep(db)
    other = tmp_path / "other.yaml"
    other.write_text("name: other\nhost: sim\nflags: {model-path: /m}\nmatrix:\n  chunked-prefill-size: [512, 1024]\n")
    result = CliRunner().invoke(app, ["sweep", str(other), "--resume", SWEEP, "--db", str(db), "--yes"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"sweep {SWEEP} is of matrix 'glm5-nvfp4-sm120' (configs/glm5.yaml)" in result.output, result.output
    assert f"orchestrator sweep configs/glm5.yaml --resume {SWEEP}" in result.output
    with Store(db) as store:
        assert store.runs(SWEEP) == []  # nothing launched, nothing reopened


def test_the_same_axes_under_another_file_name_may_resume(tmp_path: Path) -> None:
    from orchestrator.cli.sweep_resume import foreign_matrix
    from orchestrator.config.load import load_matrix

    db = tmp_path / "o.db"
    _stored_sweep(db)
    moved = tmp_path / "renamed.yaml"
    moved.write_text(
        "host: sim\nflags: {model-path: zai/GLM-5, tp-size: 8}\n"
        "matrix:\n  attention-backend: [triton, flashinfer]\n  kv-cache-dtype: [fp8_e4m3]\n"
    )
    with Store(db) as store:
        assert foreign_matrix(store, SWEEP, load_matrix(moved)) is None
