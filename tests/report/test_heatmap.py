"""The heat-map's grid spans the matrix's own axes; cells an `include:` entry adds whole are listed beside it."""

from __future__ import annotations

import json
import re

from orchestrator.model import Cell, FlagValue, Status
from orchestrator.report.heatmap import cell_data, include_only, matrix_axes
from orchestrator.report.html import render_html
from orchestrator.store.results import CellResult, aggregate
from tests.store.test_records import make_run, make_sweep, make_verdict

MATRIX_YAML = """name: layout
flags: {model-path: /m}
matrix:
  attention-backend: [flashinfer, nsa]
  kv-cache-dtype: [bf16, fp8_e4m3]
  include:
    - {attention-backend: nsa, sampling-backend: pytorch}   # adds a flag to the nsa cells: no new grid axis
    - {attention-backend: triton, kv-cache-dtype: fp8_e4m3} # a combination of its own: listed beside the grid
"""
ADDED = {"sampling-backend": "pytorch"}
TRACEBACK = {
    "lines": ["Traceback (most recent call last):", '  File "x.py", line 3, in f', "RuntimeError: boom"],
    "exception": "RuntimeError: boom",
    "line_no": 120,
}


def results() -> list[CellResult]:
    combos: list[tuple[dict[str, FlagValue], tuple[str, ...]]] = [
        ({"attention-backend": "flashinfer", "kv-cache-dtype": "bf16"}, ()),
        ({"attention-backend": "flashinfer", "kv-cache-dtype": "fp8_e4m3"}, ()),
        ({"attention-backend": "dsa", "kv-cache-dtype": "bf16", "sampling-backend": "pytorch"}, ("sampling-backend",)),
        (
            {"attention-backend": "dsa", "kv-cache-dtype": "fp8_e4m3", "sampling-backend": "pytorch"},
            ("sampling-backend",),
        ),
        ({"attention-backend": "triton", "kv-cache-dtype": "fp8_e4m3"}, ()),
    ]
    rows = []
    for n, (flags, extra) in enumerate(combos):
        cell = Cell(cell_id=f"c{n}", flags=flags, axes=("attention-backend", "kv-cache-dtype", *extra))
        failing = n % 2 == 1
        verdict = make_verdict(root_cause_line="RuntimeError: boom") if failing else make_verdict(Status.PASS)
        run = make_run(cell, state="done", verdict=verdict, run_dir=f"/work/runs/r-{n}",
                       evidence={"tracebacks": [TRACEBACK]} if failing else None)  # fmt: skip
        rows.append(aggregate(cell, [run]))
    return rows


def test_the_matrix_axes_come_from_the_stored_matrix_canonically() -> None:
    assert matrix_axes(MATRIX_YAML) == {
        "attention-backend": ("flashinfer", "dsa"),
        "kv-cache-dtype": ("bf16", "fp8_e4m3"),
    }
    assert matrix_axes("not: [yaml") is None and matrix_axes("name: x") is None
    assert include_only(results(), matrix_axes(MATRIX_YAML)) == [4]


def test_an_include_added_flag_makes_no_grid_and_an_include_only_cell_sits_beside() -> None:
    page = render_html(make_sweep(matrix_yaml=MATRIX_YAML), results())
    assert page.count('<table class="grid"') == 1, "sampling-backend must not split the grid into facets"
    assert page.count('class="empty"') == 0 and "not in the matrix" not in page
    assert len(re.findall(r'<button type="button" class="cell[^"]*" data-cell="\d+"', page)) == 5
    beside = page.split('<div class="beside">', 1)[1]
    assert 'data-cell="4"' in beside and "attention-backend=triton, kv-cache-dtype=fp8_e4m3" in beside
    assert 'data-cell="4"' not in page.split('<div class="beside">', 1)[0]


def test_a_cell_shows_its_traceback_and_log_location() -> None:
    failing = results()[1]
    data = cell_data(failing, None)
    lines = TRACEBACK["lines"]
    assert isinstance(lines, list)
    assert data["traceback"] == {"text": "\n".join(lines), "line": 120, "count": 1}
    assert data["log"] == "sim:/work/runs/r-1/server.log"
    assert cell_data(results()[0], None)["traceback"] is None
    page = render_html(make_sweep(matrix_yaml=MATRIX_YAML), results())
    cells = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))["cells"]  # type: ignore[union-attr]
    assert cells[1]["log"].endswith("/server.log") and "RuntimeError: boom" in cells[1]["traceback"]["text"]
    assert '"mono traceback"' in page and '"mono log"' in page  # the page's script renders both sections
