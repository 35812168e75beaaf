"""compare's environment: a build id the older sweep never recorded is said apart, never shown as a change.

Sweeps recorded before the tool kept an install's build (`sglang-build`) and commit (`sglang-commit`) have
no such key; comparing one with a newer sweep must not read "sglang-build None -> <id>" as what a nightly
upgrade changed, while a real change of version, build or package still shows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from orchestrator.analysis.compare import compare, split_by_install
from orchestrator.analysis.environment import env_diff, env_not_recorded
from orchestrator.analysis.render import render_comparison
from orchestrator.cli import app
from orchestrator.model import Status
from orchestrator.store import Store
from tests.analysis.test_inputs import PASS, Verdict, matrix, view
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

AXES = {"attention-backend": ["dsa", "triton"]}
BUILD = "3f2a91c0d4e5b6a7"
OLD_PACKAGES = {"torch": "2.9.1", "flashinfer-python": "0.5.3"}
NEW_PACKAGES = {**OLD_PACKAGES, "sglang-build": BUILD, "sglang-commit": "29b7f22d8"}


def _all_pass(flags: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
    return PASS, ()


def test_a_build_the_older_sweep_did_not_record_is_not_a_change() -> None:
    cells = matrix(AXES, _all_pass)
    before = view(cells, packages=OLD_PACKAGES)
    after = view(cells, sweep_id="s2", packages=NEW_PACKAGES)
    result = compare(before, after)
    assert result.env_diff == {}
    assert result.env_not_recorded == {"sglang-build": (None, BUILD), "sglang-commit": (None, "29b7f22d8")}
    assert result.notes == (
        "not recorded in s1 (made by an older orchestrator, or the host could not say), so not shown as changed: "
        f"sglang-build ({BUILD} in s2), sglang-commit (29b7f22d8 in s2)",
    )

    data = json.loads(render_comparison(result, "json"))
    assert data["env_diff"] == {}
    assert data["env_not_recorded"] == {"sglang-build": [None, BUILD], "sglang-commit": [None, "29b7f22d8"]}
    term = render_comparison(result, "term", width=400)
    assert "environment" not in term and "None" not in term
    assert "no change in the 2 matched cells" in term
    assert "note: not recorded in s1 (" in term and f"sglang-build ({BUILD} in s2)" in term
    md = render_comparison(result, "md")
    assert "#### Environment" not in md and "| sglang-build |" not in md
    assert "> not recorded in s1 (" in md and f"sglang-build ({BUILD} in s2)" in md


def test_real_changes_still_show_beside_an_unrecorded_build() -> None:
    cells = matrix(AXES, _all_pass)
    before = view(cells, version="0.5.9", packages=OLD_PACKAGES)
    after = view(cells, sweep_id="s2", version="0.5.10", packages={**NEW_PACKAGES, "torch": "2.10.0"})
    result = compare(before, after)
    assert result.env_diff == {"sglang": ("0.5.9", "0.5.10"), "torch": ("2.9.1", "2.10.0")}
    assert set(result.env_not_recorded) == {"sglang-build", "sglang-commit"}
    term = render_comparison(result, "term", width=400)
    assert "environment" in term and "0.5.10" in term
    assert not any("sglang-build" in line and "None" in line for line in term.splitlines())


def test_one_build_to_another_is_a_change() -> None:
    """The nightly case: the same version string, another build. Both recorded, so it is a change."""
    cells = matrix(AXES, _all_pass)
    before = view(cells, packages={**NEW_PACKAGES, "sglang-build": "aaaa0000aaaa0000"})
    after = view(cells, sweep_id="s2", packages=NEW_PACKAGES)
    result = compare(before, after)
    assert result.env_diff == {"sglang-build": ("aaaa0000aaaa0000", BUILD)}
    assert result.env_not_recorded == {} and result.notes == ()
    assert json.loads(render_comparison(result, "json"))["env_diff"] == {"sglang-build": ["aaaa0000aaaa0000", BUILD]}
    assert "| sglang-build | aaaa0000aaaa0000 | 3f2a91c0d4e5b6a7 |" in render_comparison(result, "md")


def test_a_build_the_newer_sweep_lacks_is_unknown_there_and_packages_still_count() -> None:
    """Compared the other way round, or where the host could not say: unknown in that sweep, not a change."""
    old = view([], packages=OLD_PACKAGES)
    new = view([], sweep_id="s2", packages={**NEW_PACKAGES, "sgl-kernel": "0.3.1"})
    assert env_diff(new, old) == {"sgl-kernel": ("0.3.1", None)}
    assert env_not_recorded(new, old) == {"sglang-build": (BUILD, None), "sglang-commit": ("29b7f22d8", None)}
    (note,) = compare(new, old).notes
    assert note.startswith("not recorded in s1 (") and note.endswith(
        f"sglang-build ({BUILD} in s2), sglang-commit (29b7f22d8 in s2)"
    )


def test_each_install_of_an_install_axis_is_judged_alike() -> None:
    cells = [replace(c, install=i) for i in ("before", "after") for c in matrix(AXES, _all_pass)]
    old = {"sglang[before]": "0.5.9", "sglang[after]": "0.5.23", "torch[after]": "2.9.1"}
    new = {**old, "sglang-build[before]": "aaaa", "sglang-build[after]": "bbbb", "torch[after]": "2.10.0"}
    whole = compare(view(cells, version=None, packages=old), view(cells, sweep_id="s2", version=None, packages=new))
    assert whole.env_diff == {"torch[after]": ("2.9.1", "2.10.0")}
    assert whole.env_not_recorded == {"sglang-build[after]": (None, "bbbb"), "sglang-build[before]": (None, "aaaa")}
    parts = split_by_install(view(cells, version=None, packages=new))
    installs = compare(parts["before"], parts["after"])
    assert installs.env_diff == {
        "sglang": ("0.5.9", "0.5.23"),
        "sglang-build": ("aaaa", "bbbb"),
        "torch": (None, "2.10.0"),
    }


OLD, NEW = "s-20261201-010000-aaaa", "s-20261202-010000-bbbb"


def test_the_compare_command_keeps_an_unrecorded_build_apart(tmp_path: Path) -> None:
    """Through the store and the CLI, as a user compares last month's sweep with tonight's."""
    db = tmp_path / "o.db"
    versions = {
        OLD: {"sglang": "0.5.9", "torch": "2.9.1"},
        NEW: {"sglang": "0.5.9", "torch": "2.9.1", "sglang-build": BUILD},
    }
    with Store(db) as store:
        for sweep_id, started in ((OLD, 1.0), (NEW, 2.0)):
            store.create_sweep(make_sweep(sweep_id, started_at=started, versions=versions[sweep_id]))
            cell = make_cell("cutlass")
            store.save_cells(sweep_id, [cell])
            run = make_run(cell, sweep_id=sweep_id)
            store.create_run(run)
            store.finish_run(run.run_id, make_outcome(30.0), None, make_verdict(Status.PASS), {})
    runner = CliRunner()
    as_json = runner.invoke(app, ["compare", OLD, NEW, "--format", "json", "--db", str(db)])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["env_diff"] == {} and data["env_not_recorded"] == {"sglang-build": [None, BUILD]}
    assert data["matched"] == 1
    term = runner.invoke(app, ["compare", OLD, NEW, "--db", str(db)], env={"COLUMNS": "300"})
    assert term.exit_code == 0, term.output
    assert "environment" not in term.stdout and "None" not in term.stdout
    assert f"note: not recorded in {OLD} (" in term.stdout and f"sglang-build ({BUILD} in {NEW})" in term.stdout
