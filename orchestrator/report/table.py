"""The pass/fail table of one sweep as a terminal table, Markdown, CSV or the JSON contract. Pure: strings out.

One row per cell: the values of the matrix's axes, status, phase, category, an excerpt of the root-cause
line (the reason when the log gave no line), attempts `k/N` (k passes out of N finished runs) and seconds
to ready. A cell whose runs disagree is `fail` everywhere; the term and md tables add "(flaky)", CSV and
JSON carry `flaky: true`. The JSON keys up to `ready_s` are a contract relied on by users' scripts.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

from rich.console import Console
from rich.text import Text

from orchestrator.model import UNSET, FlagValue, Status
from orchestrator.report import speed_view
from orchestrator.report.term_grid import Cell as GridCell
from orchestrator.report.term_grid import Column, Grid
from orchestrator.store.records import SweepRecord
from orchestrator.store.results import CellResult, SweepSummary

TableFormat = Literal["term", "md", "csv", "json"]
FORMATS: tuple[TableFormat, ...] = ("term", "md", "csv", "json")

EXCERPT_CHARS = 80
MD_MAX_CHARS = 60_000
"""GitHub refuses comments over 65,536 characters; leave room for the text around the table."""

_STATUS_STYLE = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.INVALID: "yellow",
    Status.INFRA: "magenta",
    Status.SKIPPED: "dim",
}
_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")
_ESCAPED_PIPE = "\\|"
_HEADERS = ("status", "phase", "category", "root cause", "attempts", "ready s")


def summary_line(results: Sequence[CellResult]) -> str:
    """`24 cells: 8 pass, 14 fail (1 flaky), 2 invalid`."""
    parts = []
    for status in Status:
        count = sum(r.status is status for r in results)
        if count:
            flaky = sum(r.flaky for r in results) if status is Status.FAIL else 0
            parts.append(f"{count} {status.value}" + (f" ({flaky} flaky)" if flaky else ""))
    not_run = sum(r.status is None for r in results)
    if not_run:
        parts.append(f"{not_run} not run")
    noun = "cell" if len(results) == 1 else "cells"
    return f"{len(results)} {noun}: {', '.join(parts)}" if parts else f"{len(results)} {noun}"


def axis_columns(results: Sequence[CellResult]) -> list[str]:
    """The columns that tell cells apart: `host` on a pool of hosts, `install` when any cell has one, then every
    axis in matrix order."""
    pooled = any(r.cell.host for r in results) or len({h for r in results for h in r.hosts}) > 1
    names = ["host"] if pooled else []
    names += ["install"] if any(r.cell.install for r in results) else []
    for result in results:
        names.extend(a for a in result.cell.axes if a not in names)
    return names


def _axis_value(result: CellResult, name: str) -> FlagValue:
    if name == "host":  # the host axis's lane, else the host the shown run ran on
        return result.cell.host or ",".join(result.hosts) or None
    return result.cell.install if name == "install" else result.cell.flags.get(name)


def _value_text(value: FlagValue, missing: str) -> str:
    if value is None:
        return missing
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def status_text(result: CellResult) -> str:
    """The status as the human tables show it."""
    if result.status is None:
        return "unfinished" if result.unfinished_run_id else "not run"
    # `*`: the server ran some flag otherwise than asked (footnote under the table): not what the row claims.
    mark = "*" if result.drift else ""
    if result.passes_on:
        return (
            f"{result.status.value}{mark} on {', '.join(result.fails_on)} (passes on {', '.join(result.passes_on)})"
        )
    return f"{result.status.value}{mark} (flaky)" if result.flaky else f"{result.status.value}{mark}"


def drift_notes(results: Sequence[CellResult]) -> list[tuple[bool, str]]:
    """The footnotes of `*` rows: (whether a flag under test, an axis, was changed, the note's text)."""
    notes = []
    for result in results:
        for flag, seen in result.drift.items():
            axis = flag in result.cell.axes
            notes.append((axis, (
                f"* {result.cell.label or result.cell.cell_id}: --{flag} asked {seen.get('asked')}, the server ran "
                f"{seen.get('used')}" + (" (an axis under test: this row did not test it)" if axis else "")
                + f"; {seen.get('evidence')}"
            )))  # fmt: skip
    return sorted(notes, key=lambda n: not n[0])


def root_cause_excerpt(result: CellResult, limit: int | None = EXCERPT_CHARS) -> str:
    """The root-cause line without its log timestamp, cut to `limit` characters (None: whole); else the reason.

    A passing cell shows nothing: its "root cause" is only the last healthy marker the log reached.
    """
    if result.status is Status.PASS:
        return ""
    text = _LOG_PREFIX.sub("", (result.root_cause_line or result.reason).strip())
    text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _run_text(result: CellResult) -> str:
    """The run the row shows, or the one still in flight; `-` for a cell that never ran."""
    return result.run_id or result.unfinished_run_id or "-"


def _ready_text(result: CellResult) -> str:
    return "-" if result.ready_s is None else f"{result.ready_s:.1f}"


def _human_cells(result: CellResult) -> list[str]:
    return [
        status_text(result),
        result.phase.value if result.phase else "-",
        result.category.value if result.category else "-",
        root_cause_excerpt(result),
        result.attempts_text,
        _ready_text(result),
    ]


TERM_COLUMNS = (
    Column("status", "verdict"),
    Column("phase", "verdict"),
    Column("category", "verdict"),
    # The first of the extras, so the last to give way: `repro` and `bugreport` take it.
    Column("run", "extra"),
    Column("attempts", "extra", right=True),
    Column("ready s", "extra", right=True),
    Column("root cause", "cause"),
)


def _grid(results: Sequence[CellResult]) -> Grid:
    axes = axis_columns(results)
    speed = speed_view.shown(results)
    rows = []
    for result in results:
        status, phase, category, _, attempts, ready = _human_cells(result)
        style = "dim" if result.status is None else _STATUS_STYLE[result.status]
        cause = root_cause_excerpt(result, None)
        row = [GridCell(_value_text(_axis_value(result, a), UNSET)) for a in axes]
        row += [GridCell(status, style), GridCell(phase), GridCell(category), GridCell(_run_text(result))]
        # tok/s right after the run: of the extras, it gives way after attempts and seconds to ready.
        row += [GridCell(speed_view.cell_text(result))] if speed else []
        row += [GridCell(attempts), GridCell(ready), GridCell(cause, "" if result.root_cause_line else "italic")]
        rows.append(row)
    columns = [*TERM_COLUMNS[:4], *([speed_view.COLUMN] if speed else []), *TERM_COLUMNS[4:]]
    return Grid([*(Column(a, "axis") for a in axes), *columns], rows)


def term_lines(
    results: Sequence[CellResult], sweep: SweepRecord, width: int | None, *, wide: bool = False
) -> list[Text]:
    """The terminal table as lines: title, header, rows, summary; `width=None` (a pipe) keeps every row whole.

    At a width, root causes are cut to what is left of the line (`wide` wraps them instead), and a last
    line says how to see them whole.
    """
    # Text, not str, throughout: a flag value such as `[/]` is the user's text, never rich markup.
    layout = _grid(results).render(width, wrap=wide)
    lines = [Text(f"{sweep.name} · {sweep.sweep_id} on {sweep.host}", style="bold"), *layout.lines]
    lines.append(Text(summary_line(results)))
    for axis, note in drift_notes(results):
        lines.append(Text(("warning: " if axis else "") + note, style="bold yellow" if axis else "yellow"))
    if layout.cut:
        lines.append(Text(f"whole root causes: orchestrator table {sweep.sweep_id} --wide (or -f csv)", style="dim"))
    if "run" in layout.hidden:
        # Kept within 80 columns: it is printed where the table had no room for the run column.
        lines.append(Text(f"run ids (repro, bugreport): orchestrator table {sweep.sweep_id} -f csv", style="dim"))
    if speed_view.HEADER in layout.hidden:
        lines.append(Text(f"tok/s of the passing cells: orchestrator table {sweep.sweep_id} --best (or -f csv)",
                          style="dim"))  # fmt: skip
    return lines


def render_term(
    results: Sequence[CellResult], sweep: SweepRecord, width: int | None = 120, color: bool = False, wide: bool = False
) -> str:
    """The terminal table as text of the given width (None: a pipe's, every row whole), ANSI colours when `color`."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 80, force_terminal=color, color_system="standard" if color else None)
    for line in term_lines(results, sweep, width, wide=wide):
        console.print(line, soft_wrap=True)
    return buffer.getvalue()


def _md_text(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _md_code(text: str) -> str:
    """A code span that survives any backticks in the text; pipes stay escaped, as GFM tables require."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', _ESCAPED_PIPE)}{pad}{fence}"


def render_md(results: Sequence[CellResult], sweep: SweepRecord, max_chars: int = MD_MAX_CHARS) -> str:
    """A GitHub-flavoured Markdown table with a one-line heading, cut short to fit a comment."""
    axes = axis_columns(results)
    head = f"**{_md_text(sweep.name)}** `{sweep.sweep_id}` on `{sweep.host}`: {summary_line(results)}"
    speed = speed_view.shown(results)
    headers = [*_HEADERS, *([speed_view.HEADER] if speed else [])]
    lines = [head, "", "| " + " | ".join([*map(_md_text, axes), *headers]) + " |"]
    lines.append("|" + "---|" * len(axes) + "---|---|---|---|--:|--:|" + ("--:|" if speed else ""))
    used = sum(len(line) + 1 for line in lines)
    for shown, result in enumerate(results):
        status, phase, category, cause, attempts, ready = _human_cells(result)
        values = [_md_text(_value_text(_axis_value(result, a), UNSET)) for a in axes]
        cause = _md_code(cause) if result.root_cause_line else _md_text(cause)
        cells = [*values, f"**{status}**", phase, category, cause, attempts, ready]
        cells += [_md_text(speed_view.cell_text(result))] if speed else []
        line = "| " + " | ".join(cells) + " |"
        if used + len(line) + 1 > max_chars:
            lines.append(f"\n… {len(results) - shown} more cells not shown (use `--format csv` for all).")
            break
        lines.append(line)
        used += len(line) + 1
    notes = drift_notes(results)
    if notes:
        lines.append("")
        lines += [("**warning:** " if axis else "") + _md_text(note) for axis, note in notes]
    return "\n".join(lines) + "\n"


def _csv_value(value: Any) -> str:
    return _value_text(value, "") if value is None or isinstance(value, bool) else str(value)


def render_csv(results: Sequence[CellResult], sweep: SweepRecord) -> str:
    """One CSV row per cell: axis columns, then the verdict with the full root-cause line."""
    axes = axis_columns(results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    fixed = ["cell_id", "status", "phase", "category", "root_cause_line", "attempts", "ready_s", "flaky"]
    speed = speed_view.shown(results)
    # The run id stays the last column: scripts (the README's among them) take it with `awk -F, '{print $NF}'`.
    writer.writerow([*axes, *fixed, *(speed_view.CSV_COLUMNS if speed else ()), "run_id"])
    for result in results:
        entry = result.to_dict()
        values = [_value_text(_axis_value(result, a), "") for a in axes]
        measured = speed_view.csv_values(result) if speed else []
        writer.writerow([*values, *(_csv_value(entry[k]) for k in fixed), *measured, _csv_value(entry["run_id"])])
    return buffer.getvalue()


def table_json(results: Sequence[CellResult], sweep: SweepRecord) -> dict[str, Any]:
    """The JSON contract: sweep_id, host, versions, cells[] (extra keys after those)."""
    return {
        "sweep_id": sweep.sweep_id,
        "host": sweep.host,
        "versions": dict(sweep.versions),
        "cells": [r.to_dict() for r in results],
        "name": sweep.name,
        "status": sweep.status,
        "started_at": sweep.started_at,
        "ended_at": sweep.ended_at,
        "summary": summary_line(results),
    }


def render_json(results: Sequence[CellResult], sweep: SweepRecord) -> str:
    """The JSON contract as indented text."""
    return json.dumps(table_json(results, sweep), indent=2) + "\n"


def render(fmt: TableFormat, results: Sequence[CellResult], sweep: SweepRecord, width: int | None = 120) -> str:
    """The table in one of FORMATS."""
    if fmt == "term":
        return render_term(results, sweep, width)
    return {"md": render_md, "csv": render_csv, "json": render_json}[fmt](results, sweep)


SWEEP_HEADERS = ("sweep", "host", "matrix", "started (UTC)", "status", "cells", "pass", "fail", "other", "note")


def _started(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


def _note(summary: SweepSummary) -> str:
    """Why a sweep is or is not what a bare `table` shows."""
    record = summary.sweep
    notes = ["latest"] if summary.latest else []
    if summary.kind == "run":
        notes.append("one-cell orchestrator run")
    elif summary.kind == "repro":
        notes.append(f"repro of {record.settings.get('repro_of')}")
    elif not summary.launched:
        notes.append("launched nothing")
    return ", ".join(notes)


def _sweep_row(summary: SweepSummary) -> list[str]:
    record, counts = summary.sweep, summary.counts
    other = summary.cells - counts.get("pass", 0) - counts.get("fail", 0)
    matrix = record.name
    if record.matrix_path and summary.kind == "sweep":
        matrix += f" ({record.matrix_path})"
    return [
        record.sweep_id,
        record.host,
        matrix,
        _started(record.started_at),
        record.status,
        str(summary.cells),
        str(counts.get("pass", 0)),
        str(counts.get("fail", 0)),
        ", ".join(f"{n} {s}" for s, n in counts.items() if s not in ("pass", "fail")) if other else "",
        _note(summary),
    ]


def render_sweeps(fmt: TableFormat, summaries: Sequence[SweepSummary], width: int | None = None) -> str:
    """The store's sweeps, newest first: one row each (`orchestrator sweeps`)."""
    if fmt == "json":
        latest = next((s.sweep.sweep_id for s in summaries if s.latest), None)
        return json.dumps({"latest": latest, "sweeps": [s.to_dict() for s in summaries]}, indent=2) + "\n"
    rows = [_sweep_row(s) for s in summaries]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([h.replace(" (UTC)", "_utc").replace(" ", "_") for h in SWEEP_HEADERS])
        writer.writerows(rows)
        return buffer.getvalue()
    if fmt == "md":
        lines = ["| " + " | ".join(SWEEP_HEADERS) + " |", "|" + "---|" * 5 + "--:|" * 3 + "---|---|"]
        lines += ["| " + " | ".join(map(_md_text, row)) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    if not rows:
        return "no sweeps in this store yet\n"
    return "\n".join(_sweep_lines(rows, width)) + "\n"


def _sweep_lines(rows: list[list[str]], width: int | None) -> list[str]:
    """One line per sweep where it fits the width (a pipe: always); else each sweep on two lines."""
    columns = [Column(h, "axis", right=h in ("cells", "pass", "fail")) for h in SWEEP_HEADERS]
    grid = Grid([*columns[:-1], Column("note", "cause")], [[GridCell(v) for v in row] for row in rows])
    one_line = [line.plain for line in grid.render(None).lines]
    if width is None or max(map(len, one_line)) <= width:
        return one_line
    lines = []
    for sweep_id, host, matrix, started, status, cells, passed, failed, other, note in rows:
        counts = ", ".join(p for p in (f"{passed} pass", f"{failed} fail", other) if p)
        noun = "cell" if cells == "1" else "cells"
        first = f"{sweep_id}  {host}  {status}  {cells} {noun}: {counts}"
        # The note first: where a long matrix path is cut, `latest` still shows.
        second = f"    {note + ' · ' if note else ''}started {started} UTC · {matrix}"
        lines += [line if len(line) <= width else line[: width - 1] + "…" for line in (first, second)]
    return lines
