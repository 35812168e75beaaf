"""A failure category keeps its colour from one report to the next, whatever else the sweep holds."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.model import Category, Status
from orchestrator.report.heatmap import CATEGORY_COLOURS, PASS_COLOUR, STATUS_COLOURS, category_colour
from orchestrator.store import Store
from tests.store.test_records import make_cell, make_run, make_sweep, make_verdict


def night(db: Path, categories: list[Category]) -> None:
    """A sweep whose cells failed with these categories, in this order (the commonest first or not)."""
    sweep = make_sweep(settings={"retries": 0})
    cells = [make_cell(f"backend{n}") for n in range(len(categories))]
    with Store(db) as store:
        store.create_sweep(sweep)
        store.save_cells(sweep.sweep_id, cells)
        for cell, category in zip(cells, categories, strict=True):
            run = make_run(cell)
            store.create_run(run)
            store.finish_run(run.run_id, None, None, make_verdict(Status.FAIL, category=category), {})


def legend(page: str) -> dict[str, str]:
    """Colour key -> background, as the page's legend chips carry them."""
    chips = re.findall(r'<span class="chip" style="--c:(#[0-9a-f]{6});--t:#[0-9a-f]{6}" data-focus="k-([^"]+)"', page)
    return {key: colour for colour, key in chips}


def report(tmp_path: Path, name: str, categories: list[Category]) -> dict[str, str]:
    db, out = tmp_path / f"{name}.db", tmp_path / f"{name}.html"
    night(db, categories)
    done = CliRunner().invoke(app, ["report", "--html", str(out), "--db", str(db)])
    assert done.exit_code == 0, done.output
    return legend(out.read_text(encoding="utf-8"))


def test_a_category_keeps_its_colour_across_reports(tmp_path: Path) -> None:
    nan, oom, hang = Category.NAN_IN_PROBS, Category.CUDA_OOM, Category.HANG_OR_TIMEOUT
    first = report(tmp_path, "first", [nan, nan, nan, oom])
    second = report(tmp_path, "second", [oom, oom, oom, hang, nan])
    assert set(first) == {"nan_in_probs", "cuda_oom"} and set(second) == {"cuda_oom", "hang_or_timeout", "nan_in_probs"}
    # The commonest failure changed (and the legend's order with it); the colours did not.
    assert next(iter(first)) == "nan_in_probs" and next(iter(second)) == "cuda_oom"
    for key in ("nan_in_probs", "cuda_oom"):
        assert first[key] == second[key] == CATEGORY_COLOURS[key]


def test_every_category_has_its_own_colour_apart_from_the_statuses() -> None:
    failures = [c.value for c in Category if c is not Category.HEALTHY]
    assert set(CATEGORY_COLOURS) == set(failures)
    colours = list(CATEGORY_COLOURS.values())
    assert len(set(colours)) == len(colours)
    assert not set(colours) & {PASS_COLOUR, *STATUS_COLOURS.values()}
    # A category a newer release added gets a colour by its name: the same one every time.
    assert category_colour("a_new_category") == category_colour("a_new_category")
