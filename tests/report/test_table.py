"""The pass/fail table renderers: the JSON contract, Markdown and CSV shape, the terminal table, the summary."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from pathlib import Path

from orchestrator.model import Category, Phase, Status
from orchestrator.report.table import (
    axis_columns,
    render,
    render_csv,
    render_json,
    render_md,
    render_term,
    root_cause_excerpt,
    summary_line,
    table_json,
)
from orchestrator.store.results import CellResult, aggregate
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

SWEEP = make_sweep()
CONTRACT_CELL_KEYS = [
    "cell_id",
    "run_id",
    "flags",
    "status",
    "phase",
    "category",
    "root_cause_line",
    "attempts",
    "ready_s",
]


def results() -> list[CellResult]:
    """Four cells: a pass, a flaky failure with a pipe in its cause, an invalid cell, and one not run yet."""
    passing, flaky, invalid, waiting = (make_cell(b) for b in ("cutlass", "flashinfer", "triton", "fa3"))
    pipe_cause = "[2026-12-02 15:31:07 TP0] AssertionError: a | b ` tick " + "x" * 100
    return [
        aggregate(
            passing,
            [make_run(passing, 1, state="done", verdict=make_verdict(Status.PASS), outcome=make_outcome(12.25))],
        ),
        aggregate(
            flaky,
            [
                make_run(flaky, 1, state="done", verdict=make_verdict(root_cause_line=pipe_cause), run_id="r-flaky1"),
                make_run(flaky, 2, state="done", verdict=make_verdict(Status.PASS)),
            ],
        ),
        aggregate(
            invalid,
            [
                make_run(
                    invalid,
                    1,
                    state="done",
                    verdict=make_verdict(
                        Status.INVALID,
                        phase=Phase.ARG_PARSE,
                        category=Category.INVALID_ARGUMENT,
                        root_cause_line=None,
                        reason="triton does not support DSA with an fp8 KV cache",
                    ),
                )
            ],
        ),
        aggregate(waiting, []),
    ]


def test_summary_line() -> None:
    assert summary_line(results()) == "4 cells: 1 pass, 1 fail (1 flaky), 1 invalid, 1 not run"
    assert summary_line([]) == "0 cells"
    assert summary_line(results()[:1]) == "1 cell: 1 pass"


def test_json_contract_keys_and_values() -> None:
    rows = results()
    data = json.loads(render_json(rows, SWEEP))
    assert list(data)[:4] == ["sweep_id", "host", "versions", "cells"]
    assert (data["sweep_id"], data["host"], data["versions"]) == (SWEEP.sweep_id, "sim", SWEEP.versions)
    for cell in data["cells"]:
        assert list(cell)[: len(CONTRACT_CELL_KEYS)] == CONTRACT_CELL_KEYS
        assert all(not name.startswith("-") for name in cell["flags"])
    passing, flaky, invalid, waiting = data["cells"]
    assert passing["flags"]["attention-backend"] == "cutlass" and passing["flags"]["tp-size"] == 8
    assert (passing["status"], passing["attempts"], passing["ready_s"], passing["phase"]) == (
        "pass",
        "1/1",
        12.25,
        None,
    )
    assert (flaky["status"], flaky["flaky"], flaky["attempts"], flaky["run_id"]) == ("fail", True, "1/2", "r-flaky1")
    assert flaky["root_cause_line"].startswith("[2026-12-02 15:31:07 TP0] AssertionError: a | b")
    assert (invalid["status"], invalid["phase"], invalid["category"]) == ("invalid", "arg_parse", "invalid_argument")
    assert (waiting["status"], waiting["run_id"], waiting["attempts"]) == (None, None, "0/0")
    assert table_json(rows, SWEEP) == data


def _md_columns(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_is_a_well_formed_table() -> None:
    text = render_md(results(), SWEEP)
    lines = text.splitlines()
    assert lines[0].startswith("**glm5-nvfp4-sm120** `s-20261202-153012-ab12` on `sim`: 4 cells")
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 4
    assert all(_md_columns(line) == 2 + 6 for line in table)
    assert (
        table[0]
        == "| attention-backend | kv-cache-dtype | status | phase | category | root cause | attempts | ready s |"
    )
    flaky_row = table[3]
    assert "**fail (flaky)**" in flaky_row and "a \\| b" in flaky_row and "``" in flaky_row
    assert "15:31:07" not in flaky_row  # the log's timestamp is dropped from the excerpt
    assert "fp8\\_e4m3" in flaky_row
    assert "triton does not support DSA" in text and "**not run**" in text


def test_markdown_is_cut_to_fit_a_comment() -> None:
    many = [replace(results()[0], cell=make_cell(f"b{i}")) for i in range(500)]
    text = render_md(many, SWEEP, max_chars=5_000)
    assert len(text) <= 5_000 + 100
    assert re.search(r"… \d+ more cells not shown", text)


def test_csv_has_one_row_per_cell_with_full_causes() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(results(), SWEEP))))
    assert len(rows) == 4
    assert list(rows[0])[:3] == ["attention-backend", "kv-cache-dtype", "cell_id"]
    assert [r["status"] for r in rows] == ["pass", "fail", "invalid", ""]
    assert rows[1]["flaky"] == "true" and rows[0]["flaky"] == "false"
    assert rows[1]["root_cause_line"].endswith("x" * 100)
    assert rows[0]["ready_s"] == "12.25" and rows[3]["ready_s"] == ""


def test_term_table_shows_every_cell_and_the_summary() -> None:
    text = render_term(results(), SWEEP, width=200)
    for expected in ("cutlass", "fail (flaky)", "invalid", "not run", "1/2", "12.2", "4 cells: 1 pass"):
        assert expected in text
    assert "\x1b[" not in text
    assert "\x1b[" in render_term(results(), SWEEP, width=200, color=True)


def test_root_cause_excerpt() -> None:
    _, flaky, invalid, _ = results()
    excerpt = root_cause_excerpt(flaky)
    assert excerpt.startswith("AssertionError: a | b") and len(excerpt) == 80 and excerpt.endswith("…")
    assert root_cause_excerpt(invalid) == "triton does not support DSA with an fp8 KV cache"


def test_axis_columns_put_install_first_and_merge_axes() -> None:
    first = aggregate(make_cell(install="nightly"), [])
    second = aggregate(make_cell(axes=("kv-cache-dtype", "tp-size")), [])
    assert axis_columns([first, second]) == ["install", "attention-backend", "kv-cache-dtype", "tp-size"]


def test_render_dispatches_every_format() -> None:
    for fmt in ("term", "md", "csv", "json"):
        assert "flashinfer" in render(fmt, results(), SWEEP)


def test_the_list_of_sweeps_fits_a_terminal_and_keeps_rows_whole_in_a_pipe(tmp_path: Path) -> None:
    from orchestrator.report.table import render_sweeps
    from tests.store.test_latest import NIGHT, morning

    with morning(tmp_path / "o.db") as store:
        summaries = store.sweep_summaries()
    piped = render_sweeps("term", summaries).splitlines()
    assert len(piped) == 1 + len(summaries) and piped[0].split()[:3] == ["sweep", "host", "matrix"]
    assert any(line.startswith(NIGHT) and line.rstrip().endswith("latest") for line in piped)
    narrow = render_sweeps("term", summaries, 80).splitlines()
    assert all(len(line) <= 80 for line in narrow) and len(narrow) == 2 * len(summaries)
    night = narrow.index(next(line for line in narrow if line.startswith(NIGHT)))
    assert narrow[night].endswith("3 cells: 1 pass, 2 fail")
    assert narrow[night + 1].startswith("    latest · started ") and "UTC · glm5-nvfp4-sm120" in narrow[night + 1]
