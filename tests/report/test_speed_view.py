"""The tok/s column, `table --sort speed` and `table --best` on hand-built results (pure)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from orchestrator.cli.report import json_report, markdown_report
from orchestrator.model import ProbeOutcome, Status
from orchestrator.probe.speed import not_measured
from orchestrator.report import speed_view
from orchestrator.report.html import render_html
from orchestrator.report.speed_colours import speed_palette
from orchestrator.report.table import render
from orchestrator.store.results import CellResult, aggregate
from tests.store.test_records import make_cell, make_run, make_sweep, make_verdict

SWEEP = make_sweep()
LOAD = {"requests": 32, "concurrency": 8, "input_len": 256, "output_len": 128, "repeat": 3}


def speed(median: float, low: float, high: float) -> dict[str, Any]:
    return {
        "valid": True,
        "why": None,
        "output_tok_s": {"median": median, "min": low, "max": high},
        "request_s": {"median": 1.0, "min": 1.0, "max": 1.0},
        "ttft_ms": {"p50": 40.0, "p99": 90.0},
        "itl_ms": {"p50": 7.5, "p99": 12.0},
        "repeats": [{"span_s": 4.0, "output_tokens": 4096, "output_tok_s": median}] * 3,
        "load": LOAD,
        "overhead_s": 0.01,
    }


def passing(backend: str, measured: dict[str, Any] | None) -> CellResult:
    cell = make_cell(backend)
    outcome = ProbeOutcome(reached_ready=True, ready_s=20.0, speed=measured)
    command = f"python -m sglang.launch_server --attention-backend {backend} --port 30000"
    run = make_run(cell, 1, state="done", verdict=make_verdict(Status.PASS), outcome=outcome, command=command)
    return aggregate(cell, [run])


def results() -> list[CellResult]:
    failing = make_cell("flashinfer")
    return [
        passing("triton", speed(800.0, 790.0, 812.0)),
        aggregate(failing, [make_run(failing, 1, state="done", verdict=make_verdict())]),
        passing("fa3", speed(1000.0, 980.0, 1010.0)),
        passing("cutlass", not_measured("2 of 32 load requests failed (repeat 1 of 3); first: HTTP 500", LOAD, 0.1)),
    ]


def test_the_tok_s_column_shows_median_and_spread_or_why_not() -> None:
    term = render("term", results(), SWEEP, width=None)
    assert "tok/s" in term.splitlines()[1]
    rows = {line.split()[0]: line for line in term.splitlines()[2:6]}
    assert "800 ± 11" in rows["triton"] and "1000 ± 15" in rows["fa3"] and "invalid" in rows["cutlass"]
    md = render("md", results(), SWEEP)
    assert "| tok/s |" in md and "| 1000 ± 15 |" in md
    table = list(csv.DictReader(io.StringIO(render("csv", results(), SWEEP))))
    assert table[2]["output_tok_s"] == "1000.0" and table[2]["output_tok_s_min"] == "980.0"
    assert table[3]["output_tok_s"] == "" and table[3]["speed_why"].startswith("2 of 32 load requests failed")
    assert table[1]["output_tok_s"] == "" and table[1]["speed_why"] == ""


def test_json_has_speed_on_passing_cells_only() -> None:
    cells = json.loads(render("json", results(), SWEEP))["cells"]
    assert cells[0]["speed"]["output_tok_s"] == {"median": 800.0, "min": 790.0, "max": 812.0}
    assert cells[0]["speed"]["ttft_ms"] == {"p50": 40.0, "p99": 90.0} and cells[0]["speed"]["valid"] is True
    assert cells[1]["speed"] is None
    assert cells[3]["speed"]["valid"] is False and cells[3]["speed"]["output_tok_s"] is None
    assert cells[3]["speed"]["why"].startswith("2 of 32")


def test_without_any_measurement_the_tables_are_as_before() -> None:
    unmeasured = [passing("triton", None)]
    assert "tok/s" not in render("term", unmeasured, SWEEP, width=None)
    assert "output_tok_s" not in render("csv", unmeasured, SWEEP)


def test_sort_by_speed_and_the_best_cell_with_its_command() -> None:
    ranked = speed_view.by_speed(results())
    assert [r.cell.flags["attention-backend"] for r in ranked] == ["fa3", "triton", "flashinfer", "cutlass"]
    text = speed_view.render_best("term", results(), SWEEP)
    assert text.startswith(f"fastest passing cell of {SWEEP.sweep_id}: attention-backend=fa3, kv-cache-dtype=fp8_e4m3")
    assert "1000 ± 15 output tok/s" in text
    assert text.rstrip().endswith("command: python -m sglang.launch_server --attention-backend fa3 --port 30000")
    best = json.loads(speed_view.render_best("json", results(), SWEEP))
    assert best["best"]["cell_id"] == "c-fa3-fp8_e4m3" and best["best"]["beyond_noise_of_next"] is True
    assert best["measured_cells"] == 2


def test_no_best_cell_says_why() -> None:
    only_invalid = [results()[3]]
    assert "none of the 1 passing cells has a valid speed" in speed_view.best_text(only_invalid, SWEEP)
    assert json.loads(speed_view.render_best("json", only_invalid, SWEEP))["best"] is None


def test_a_close_runner_up_is_said_to_be_within_the_noise() -> None:
    close = [passing("triton", speed(990.0, 970.0, 1005.0)), passing("fa3", speed(1000.0, 980.0, 1010.0))]
    assert "within the noise of this one" in speed_view.best_text(close, SWEEP)


def test_the_heat_map_can_colour_passing_cells_by_speed() -> None:
    page = render_html(SWEEP, results(), colour="speed")
    palette = speed_palette(results())
    fastest, slowest = palette.of(results()[2]), palette.of(results()[0])
    assert fastest == ("#005a32", "#ffffff") and slowest[0] == "#e5f5e0"
    assert palette.of(results()[1]) == palette.colours["nan_in_probs"]  # failures keep their verdict's colour
    assert palette.of(results()[3]) == palette.colours["pass"]  # passed, but no valid speed
    assert "slowest 800 tok/s" in page and "fastest 1000 tok/s" in page and ">1000 tok/s<" in page
    assert f"--c:{fastest[0]}" in page
    assert "tok/s" not in render_html(SWEEP, results())  # the verdict colours stay the default


def _slower_fa3() -> list[CellResult]:
    return [*results()[:2], passing("fa3", speed(880.0, 870.0, 890.0)), results()[3]]


def test_the_reports_carry_speed_regressions_and_what_moves_the_speed() -> None:
    before = make_sweep("s-20261201-000000-aaaa")
    data = json_report(SWEEP, _slower_fa3(), (before, results()))
    regressions = data["compare"]["speed_regressions"]
    assert [r["cell_id"] for r in regressions] == ["c-fa3-fp8_e4m3"] and regressions[0]["change"] == -0.12
    assert "speed_effects" in data["explain"]
    assert "#### Speed, output tok/s" in markdown_report(SWEEP, _slower_fa3(), (before, results()))
    page = render_html(SWEEP, _slower_fa3(), baseline=(before, results()))
    assert "speed: attention-backend=fa3, kv-cache-dtype=fp8_e4m3: 1000 → 880 output tok/s (-12.0%" in page
    assert "<li>attention-backend=fa3 is 25% faster than triton (1 of 1 matched pairs beyond the noise)</li>" in (
        render_html(SWEEP, results())
    )
