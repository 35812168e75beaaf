"""Speed in the table: the `tok/s` column, `table --sort speed` and `table --best`. Pure: strings out.

A passing cell shows its output tokens/s under the standard load as `median ± half the band` over the
load's repeats; a passing cell whose load went wrong shows `invalid` (its JSON `speed.why` says why); a
failing cell shows nothing, because nothing was measured. The fastest passing cell is the one with the
highest median; `--best` names it with the exact command its run launched, ready to copy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator.model import Status
from orchestrator.probe.speed import Band, band_of, beyond_noise, speed_text
from orchestrator.report.term_grid import Column
from orchestrator.store.records import RunRecord, SweepRecord
from orchestrator.store.results import CellResult

HEADER = "tok/s"
COLUMN = Column(HEADER, "extra", right=True)
CSV_COLUMNS = ("output_tok_s", "output_tok_s_min", "output_tok_s_max", "ttft_ms_p50", "itl_ms_p50", "speed_why")


def shown(results: Sequence[CellResult]) -> bool:
    """Whether any cell was measured (else the tables stay as they were: no empty column)."""
    return any(r.speed for r in results)


def cell_text(result: CellResult) -> str:
    """What the `tok/s` column shows for one cell."""
    if result.status is not Status.PASS:
        return ""
    return speed_text(result.speed)


def csv_values(result: CellResult) -> list[str]:
    """The CSV_COLUMNS of one cell (empty where nothing was measured)."""
    speed = result.speed or {}
    band = band_of(speed)
    ttft, itl = speed.get("ttft_ms") or {}, speed.get("itl_ms") or {}
    figures = [band.median, band.low, band.high, ttft.get("p50"), itl.get("p50")] if band else [None] * 5
    return [*("" if v is None else str(v) for v in figures), str(speed.get("why") or "")]


def _median(result: CellResult) -> float | None:
    band = band_of(result.speed) if result.status is Status.PASS else None
    return None if band is None else band.median


def by_speed(results: Sequence[CellResult]) -> list[CellResult]:
    """Fastest first: measured passing cells by median, then the other cells in their own order."""
    measured = [r for r in results if _median(r) is not None]
    rest = [r for r in results if _median(r) is None]
    return sorted(measured, key=lambda r: -(_median(r) or 0.0)) + rest


def fastest(results: Sequence[CellResult]) -> CellResult | None:
    """The passing cell with the highest median output tokens/s, if any was measured."""
    ranked = by_speed(results)
    return ranked[0] if ranked and _median(ranked[0]) is not None else None


def _run(result: CellResult) -> RunRecord | None:
    return next((r for r in result.runs if r.run_id == result.run_id), None)


def best_json(results: Sequence[CellResult], sweep: SweepRecord) -> dict[str, Any]:
    """`table --best --format json`: the fastest passing cell, its speed, run and command (null when none)."""
    best = fastest(results)
    entry: dict[str, Any] | None = None
    if best is not None:
        run = _run(best)
        entry = {
            "cell_id": best.cell.cell_id,
            "label": best.cell.label,
            "run_id": best.run_id,
            "command": run.command if run else None,
            "speed": best.speed,
            "beyond_noise_of_next": _ahead(results, best),
        }
    measured = sum(_median(r) is not None for r in results)
    return {"sweep_id": sweep.sweep_id, "best": entry, "measured_cells": measured}


def _ahead(results: Sequence[CellResult], best: CellResult) -> bool | None:
    """Whether the fastest is faster than the runner-up beyond both noise bands (None: no runner-up)."""
    ranked = [r for r in by_speed(results) if _median(r) is not None]
    if len(ranked) < 2:
        return None
    first, second = band_of(best.speed), band_of(ranked[1].speed)
    return first is not None and second is not None and beyond_noise(second, first)


def best_text(results: Sequence[CellResult], sweep: SweepRecord) -> str:
    """`table --best`: the fastest passing cell in words, and its exact command."""
    data = best_json(results, sweep)
    entry = data["best"]
    if entry is None:
        passing = sum(r.status is Status.PASS for r in results)
        why = "no cell passed" if not passing else f"none of the {passing} passing cells has a valid speed"
        return f"{sweep.sweep_id}: no fastest cell ({why}; `orchestrator table {sweep.sweep_id} -f json` says why)\n"
    speed = entry["speed"]
    ttft, itl = speed.get("ttft_ms") or {}, speed.get("itl_ms") or {}
    load = speed.get("load") or {}
    lines = [
        f"fastest passing cell of {sweep.sweep_id}: {entry['label']} ({entry['cell_id']}, run {entry['run_id']})",
        f"  {speed_text(speed)} output tok/s (median ± half the spread of {len(speed.get('repeats') or [])} repeats); "
        f"TTFT p50 {ttft.get('p50')} ms, p99 {ttft.get('p99')} ms; "
        f"ITL p50 {itl.get('p50')} ms, p99 {itl.get('p99')} ms",
        f"  load: {load.get('requests')} requests, concurrency {load.get('concurrency')}, "
        f"{load.get('input_len')} tokens in, {load.get('output_len')} out",
    ]
    ahead = entry["beyond_noise_of_next"]
    if ahead is False:
        lines.append("  (the next fastest cell is within the noise of this one: either will do)")
    lines.append(f"  command: {entry['command']}")
    return "\n".join(lines) + "\n"


def render_best(fmt: str, results: Sequence[CellResult], sweep: SweepRecord) -> str:
    """`table --best` in a format: json, else the text."""
    if fmt == "json":
        return json.dumps(best_json(results, sweep), indent=2) + "\n"
    return best_text(results, sweep)


def speeds_of(results: Sequence[CellResult]) -> dict[str, Band]:
    """Cell id -> output tokens/s band of every passing cell with a valid speed (what compare and explain weigh)."""
    found = {}
    for result in results:
        band = band_of(result.speed) if result.status is Status.PASS and not result.flaky else None
        if band is not None:
            found[result.cell.cell_id] = band
    return found
