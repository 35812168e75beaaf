"""The terminal table at 80 and 120 columns and piped: the verdict always shows, the root cause takes what is left."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.model import Category, Cell, FlagValue, Phase, Status, Verdict
from orchestrator.report.table import render_term
from orchestrator.store import Store
from orchestrator.store.results import CellResult, aggregate
from tests.store.test_records import make_run, make_sweep, make_verdict

SWEEP = make_sweep()
AXES = ("attention-backend", "dsa-decode-backend", "kv-cache-dtype", "fp8-gemm-backend")
LONG_CAUSE = (
    "[2026-12-02 15:31:07 TP0] ValueError: DSA models with an FP8 KV cache (nsa_kv_cache_store_fp8) are not "
    "supported with the triton attention backend; use flashmla_sparse or a bf16 KV cache instead"
)
VERDICTS = [
    make_verdict(),
    Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY),
    make_verdict(
        phase=Phase.CUDA_GRAPH_CAPTURE, category=Category.KERNEL_NOT_SUPPORTED_ON_ARCH, root_cause_line=LONG_CAUSE
    ),
    make_verdict(Status.INVALID, phase=Phase.ARG_PARSE, category=Category.INVALID_ARGUMENT, root_cause_line=None),
]


def demo_like() -> list[CellResult]:
    """The demo's shape: four long axis names, the longest phase and category names, a long root cause."""
    rows = []
    values = itertools.product(("flashinfer", "triton"), ("flashmla_sparse", "fa3"), ("fp8_e4m3",), ("deep_gemm",))
    for n, combo in enumerate(values):
        flags: dict[str, FlagValue] = {**dict(zip(AXES, combo, strict=True)), "tp-size": 8}
        cell = Cell(cell_id=f"c{n}", flags=flags, axes=AXES)
        verdict = VERDICTS[n % len(VERDICTS)]
        rows.append(aggregate(cell, [make_run(cell, state="done", verdict=verdict)]))
    return rows


def cell_lines(text: str, result: CellResult) -> list[str]:
    """The line(s) of the table that belong to one cell: its axis values' line, and the next in two-line layout."""
    lines = text.splitlines()
    values = [str(result.cell.flags[a]) for a in AXES]
    pattern = re.compile(r"\s+".join(map(re.escape, values)) + r"(\s|$)")
    at = next(i for i, line in enumerate(lines) if pattern.match(line))
    return lines[at : at + 2]


@pytest.mark.parametrize("width", [80, 120])
def test_status_phase_and_category_show_for_every_cell_within_the_width(width: int) -> None:
    results = demo_like()
    text = render_term(results, SWEEP, width)
    for line in text.splitlines():
        assert len(line) <= width, line
    for result in results:
        shown = " ".join(cell_lines(text, result))
        assert result.status is not None and result.phase is not None and result.category is not None
        for word in (result.status.value, result.phase.value, result.category.value):
            assert re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", shown), (word, shown)
    # The cause had to be cut, and the table says where to read it whole.
    assert "…" in text and "--wide" in text
    assert "ValueError: DSA models" in text


def test_wide_wraps_the_root_cause_instead_of_cutting_it() -> None:
    text = render_term(demo_like(), SWEEP, 100, wide=True)
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "…" not in text and "--wide" not in text
    flat = " ".join(text.split())
    assert "use flashmla_sparse or a bf16 KV cache instead" in flat


def test_a_pipe_gets_every_row_whole_on_one_line() -> None:
    results = demo_like()
    text = render_term(results, SWEEP, None)
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.startswith("attention-backend"))
    assert re.split(r"\s{2,}", header) == [
        *AXES, "status", "phase", "category", "run", "attempts", "ready s", "root cause"
    ]  # fmt: skip
    long_row = next(line for line in text.splitlines() if "kernel_not_supported_on_arch" in line)
    assert long_row.rstrip().endswith("use flashmla_sparse or a bf16 KV cache instead")
    assert long_row.startswith("triton") and "cuda_graph_capture" in long_row and " 0/1 " in long_row
    # Every row names its run, which `repro` and `bugreport` take; nothing says where else to find them.
    for result in results:
        assert result.run_id is not None and f"  {result.run_id}  " in text
    assert "run ids" not in text


def test_where_the_run_column_gives_way_a_last_line_says_where_run_ids_are() -> None:
    results = demo_like()
    text = render_term(results, SWEEP, 80)
    assert not any(r.run_id is not None and r.run_id in text for r in results)
    assert f"run ids (repro, bugreport): orchestrator table {SWEEP.sweep_id} -f csv" in text
    wide = render_term(results, SWEEP, 200)
    assert all(r.run_id is not None and r.run_id in wide for r in results) and "run ids" not in wide


def test_narrow_matrices_keep_one_line_per_cell_at_80_columns() -> None:
    """Two short axes leave room for everything on one line: no two-line layout where it is not needed."""
    cell = Cell(cell_id="c", flags={"tp": 8, "kv": "bf16"}, axes=("tp", "kv"))
    result = aggregate(cell, [make_run(cell, state="done", verdict=make_verdict())])
    lines = render_term([result], SWEEP, 80).splitlines()
    row = next(line for line in lines if line.startswith("8 "))
    assert "fail" in row and "sampled_decode" in row and "nan_in_probs" in row and "RuntimeError" in row


def test_the_table_command_prints_whole_rows_to_a_pipe_and_wide_is_accepted(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    with Store(db) as store:
        store.create_sweep(SWEEP)
        results = demo_like()
        store.save_cells(SWEEP.sweep_id, [r.cell for r in results])
        for result in results:
            run = make_run(result.cell)
            store.create_run(run)
            assert result.runs[0].verdict is not None
            store.finish_run(run.run_id, None, None, result.runs[0].verdict, {})
    piped = CliRunner().invoke(app, ["table", "--db", str(db)])
    assert piped.exit_code == 0, piped.output
    assert "use flashmla_sparse or a bf16 KV cache instead" in piped.output and "…" not in piped.output
    wide = CliRunner().invoke(app, ["table", "--db", str(db), "--wide"])
    assert wide.exit_code == 0 and wide.output == piped.output
    data = json.loads(CliRunner().invoke(app, ["table", "--db", str(db), "-f", "json"]).output)
    assert data["cells"][2]["root_cause_line"] == LONG_CAUSE


def test_an_unset_flag_reads_the_same_in_the_label_the_table_the_map_and_explain() -> None:
    from orchestrator.analysis.predicates import shown_value
    from orchestrator.report.heatmap import axis_value

    cell = Cell(cell_id="c", flags={"enable-x": None, "kv": "bf16"}, axes=("enable-x", "kv"))
    result = aggregate(cell, [make_run(cell, state="done", verdict=make_verdict())])
    assert cell.label == "enable-x=(unset), kv=bf16"
    row = next(line for line in render_term([result], SWEEP, None).splitlines() if "bf16" in line)
    assert row.startswith("(unset)  ")
    assert axis_value(result, "enable-x") == "(unset)" == shown_value(None)
