"""`orchestrator table`: reads a store, picks the sweep, prints one of the formats; clear errors otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from orchestrator.cli import app
from orchestrator.model import Status
from orchestrator.store import Store
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

OLD, NEW = "s-20261201-010000-aaaa", "s-20261202-010000-bbbb"


def invoke(args: list[str]) -> Result:
    """Run `orchestrator table ...`, whether or not other commands are registered yet."""
    if isinstance(typer.main.get_command(app), typer.core.TyperGroup):
        args = ["table", *args]
    return CliRunner().invoke(app, args)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    with Store(path) as store:
        for sweep_id, started, status in ((OLD, 1.0, Status.FAIL), (NEW, 2.0, Status.PASS)):
            store.create_sweep(make_sweep(sweep_id, started_at=started))
            cell = make_cell("cutlass")
            store.save_cells(sweep_id, [cell])
            run = make_run(cell, sweep_id=sweep_id)
            store.create_run(run)
            store.finish_run(run.run_id, make_outcome(30.0), None, make_verdict(status), {})
    return path


def test_json_of_the_latest_sweep_by_default(db: Path) -> None:
    result = invoke(["--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["sweep_id"] == NEW and data["cells"][0]["status"] == "pass"


def test_a_sweep_by_prefix_in_markdown(db: Path) -> None:
    result = invoke(["20261201", "--db", str(db), "-f", "md"])
    assert result.exit_code == 0, result.output
    assert OLD in result.output and "**fail**" in result.output


def test_csv_and_term(db: Path) -> None:
    assert invoke([OLD, "--db", str(db), "--format", "csv"]).output.startswith("attention-backend,")
    term = invoke(["--db", str(db)])
    assert term.exit_code == 0 and "1 cell: 1 pass" in term.output


def test_the_store_comes_from_the_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DB", str(db))
    assert json.loads(invoke(["-f", "json"]).output)["sweep_id"] == NEW


def test_a_missing_store_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)
    result = invoke([])
    assert result.exit_code == 1
    assert "error: no store at orchestrator.db" in result.output
    assert not (tmp_path / "orchestrator.db").exists()


def test_an_unknown_or_ambiguous_sweep_is_a_clear_error(db: Path) -> None:
    unknown = invoke(["s-1999", "--db", str(db)])
    assert unknown.exit_code == 1 and "no sweep matches 's-1999'" in unknown.output
    assert "(fix: `orchestrator sweeps` lists them)" in unknown.output
    ambiguous = invoke(["s-2026", "--db", str(db)])
    assert ambiguous.exit_code == 1 and "ambiguous" in ambiguous.output


def test_an_unknown_format_is_refused(db: Path) -> None:
    assert invoke(["--db", str(db), "--format", "xml"]).exit_code == 2


def test_html_as_design_lists_it(db: Path) -> None:
    # DESIGN's contract: `table [SWEEP] [--format term|md|csv|json|html]`: the heat-map page, on stdout.
    page = invoke([OLD, "--db", str(db), "--format", "html"])
    assert page.exit_code == 0, page.output
    assert page.output.lstrip().lower().startswith("<!doctype html") and OLD in page.output
    assert page.output.rstrip().endswith("</html>")
    listed = invoke(["--list", "--db", str(db), "-f", "html"])
    assert listed.exit_code == 2 and "--list" in listed.output  # the list has md, csv and json, not a page


def test_an_unknown_sweep_says_where_the_ids_are(db: Path) -> None:
    unknown = invoke(["s-1999", "--db", str(db)])
    assert "`orchestrator sweeps` lists" in unknown.output, unknown.output
