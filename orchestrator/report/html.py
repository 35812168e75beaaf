"""`orchestrator report --html`: one self-contained page (inline CSS and JS, works offline). Pure: data in, HTML out.

Every text from the store is escaped on its way into the markup; the per-cell details the page's script
shows travel as JSON in a `<script type="application/json">` block with `<`, `>` and `&` escaped, and the
script writes them with textContent only, so nothing a log says can become markup.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from html import escape
from importlib import resources
from typing import Any, Literal

from orchestrator.analysis.compare import Comparison, compare
from orchestrator.analysis.explain import CLEAR, Explanation, GroupReport, explain
from orchestrator.report.heatmap import (
    Layout,
    Palette,
    axis_value,
    cell_data,
    choose_axes,
    colour_key,
    compare_marks,
    group_of,
    include_only,
    layout,
    matrix_axes,
    palette_of,
)
from orchestrator.report.speed_colours import SpeedPalette, speed_palette
from orchestrator.report.speed_view import speeds_of
from orchestrator.report.table import axis_columns, root_cause_excerpt, status_text, summary_line
from orchestrator.report.views import sweep_view
from orchestrator.store.records import SweepRecord
from orchestrator.store.results import CellResult

SHOWN_FINDINGS = 3
_MARK_TEXT = {"regression": "▼ regressed", "fix": "▲ fixed", "changed": "≠ changed", "added": "+ new"}
_MARK_HELP = {
    "regression": "passed in the baseline, fails now",
    "fix": "failed in the baseline, passes now",
    "changed": "fails in both, but differently",
    "added": "not in the baseline",
}


def _asset(name: str) -> str:
    return (resources.files("orchestrator.report") / "assets" / name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no `<`, `>` or `&` survive, so `</script>` cannot end it early."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, code in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, code)
    return text


def render_html(
    sweep: SweepRecord,
    results: Sequence[CellResult],
    *,
    baseline: tuple[SweepRecord, Sequence[CellResult]] | None = None,
    x: str | None = None,
    y: str | None = None,
    colour: Literal["status", "speed"] = "status",
) -> str:
    """The whole report page; `baseline` marks regressions and fixes against an earlier sweep.

    `colour="speed"`: the map's passing cells shaded by their output tokens/s (report/speed_colours.py).
    """
    view = sweep_view(sweep, results)
    explanation = explain(view, speeds=speeds_of(results))
    speeds = (speeds_of(baseline[1]), speeds_of(results)) if baseline else None
    comparison = compare(sweep_view(*baseline), view, speeds=speeds) if baseline else None
    axes = matrix_axes(sweep.matrix_yaml)
    allowed = list(axes) if axes else None
    beside = include_only(results, axes)
    column, row, why = choose_axes(results, explanation, x, y, allowed=allowed)
    grid = layout(results, column, row, why, allowed=allowed, beside=beside)
    palette = speed_palette(results) if colour == "speed" else palette_of(results)
    marks = compare_marks(comparison)
    data = {"cells": [cell_data(r, marks.get(r.cell.cell_id)) for r in results]}
    title = f"{sweep.name} · {sweep.sweep_id}"
    body = [
        _header(sweep, results, palette),
        _findings(explanation, palette),
        _comparison(comparison) if comparison else "",
        '<main class="layout"><section class="map" aria-label="heat-map">',
        _legend(results, palette, grid, marks),
        _grids(grid, results, palette, marks),
        '</section><aside id="detail" class="detail" aria-live="polite">'
        '<p class="hint">Hover over a cell to see its details; click to pin them.</p></aside></main>',
        _table(results, palette),
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{escape(title)}</title><style>{_asset("report.css")}</style></head>'
        f"<body>{''.join(body)}"
        f'<script type="application/json" id="report-data">{script_json(data)}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def _chip(text: str, colours: tuple[str, str], *, focus: str = "") -> str:
    attr = f' data-focus="{escape(focus)}"' if focus else ""
    return f'<span class="chip" style="--c:{colours[0]};--t:{colours[1]}"{attr}>{escape(text)}</span>'


def _header(sweep: SweepRecord, results: Sequence[CellResult], palette: Palette) -> str:
    versions = {str(k): str(v) for k, v in (sweep.versions or {}).items() if v is not None}
    sglang = versions.pop("sglang", "?")
    packages = ", ".join(f"{name} {version}" for name, version in versions.items())
    gpus = _gpus(sweep.host_facts or {})
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(sweep.started_at))
    took = f" · took {(sweep.ended_at - sweep.started_at) / 60:.1f} min" if sweep.ended_at else ""
    counts = Counter(colour_key(r) for r in results)
    chips = "".join(
        _chip(f"{counts[key]} {key}", colours, focus=f"k-{key}") for key, colours in palette.colours.items()
    )
    return (
        f'<header><h1>{escape(sweep.name)} <span class="muted">{escape(sweep.sweep_id)}</span></h1>'
        f'<p class="meta">host <b>{escape(sweep.host)}</b>{" · " if gpus else ""}{escape(gpus)}</p>'
        f'<p class="meta">SGLang <b>{escape(sglang)}</b>{" · " if packages else ""}{escape(packages)}</p>'
        f'<p class="meta muted">started {escape(started)}{escape(took)} · sweep {escape(sweep.status)}</p>'
        f'<p class="summary"><b>{escape(summary_line(results))}</b> {chips}</p></header>'
    )


def _gpus(facts: dict[str, Any]) -> str:
    """`8 × NVIDIA RTX PRO 6000 · compute capability 12.0 · driver 580.95.05`, plus any other host facts."""
    known = {"gpus", "gpu_name", "compute_cap", "driver"}
    parts = [f"{facts.get('gpus', '?')} × {facts['gpu_name']}" if facts.get("gpu_name") else ""]
    if not parts[0] and facts.get("gpus"):
        parts[0] = f"{facts['gpus']} GPUs"
    parts += [f"compute capability {facts['compute_cap']}" if facts.get("compute_cap") else ""]
    parts += [f"driver {facts['driver']}" if facts.get("driver") else ""]
    parts += [f"{k} {v}" for k, v in facts.items() if k not in known]
    return " · ".join(p for p in parts if p)


def _findings(explanation: Explanation, palette: Palette) -> str:
    if not explanation.groups:
        none = f"No cell failed ({explanation.pass_total} passed)."
        return f'<section class="findings"><h2>Why cells fail</h2><p>{none}</p></section>'
    parts = [
        '<section class="findings"><h2>Why cells fail</h2>'
        f'<p class="muted">Each failure category set against the {explanation.pass_total} passing cells '
        "(counts: cells where the finding holds).</p>"
    ]
    parts += ['<div class="groups">', *(_group(group, palette) for group in explanation.groups), "</div>"]
    if explanation.flaky:
        flaky = ", ".join(f"{c.label} ({c.passes}/{c.attempts} passed)" for c in explanation.flaky)
        parts.append(f'<p class="note">Flaky, left out of every group: {escape(flaky)}</p>')
    return "".join(parts) + _speed_effects(explanation) + "</section>"


def _speed_effects(explanation: Explanation) -> str:
    """The flag values that move output tok/s beyond the noise, as a list under the findings."""
    if not explanation.speed_effects:
        return ""
    items = "".join(f"<li>{escape(effect.text)}</li>" for effect in explanation.speed_effects)
    return f'<h3>What moves the speed</h3><ul class="speed">{items}</ul>'


def _group(group: GroupReport, palette: Palette) -> str:
    numbered = list(enumerate(group.findings, 1))
    shown = [(i, f) for i, f in numbered if f.separation >= CLEAR][:SHOWN_FINDINGS] or numbered[:1]
    items = "".join(
        f'<li value="{i}"><code>{escape(f.text)}</code>{"" if f.separation >= CLEAR else " <em>(weak)</em>"}'
        f'<span class="counts">{f.fail_with}/{f.fail_total} failing · {f.pass_with}/{f.pass_total} passing</span>'
        f'<span class="bar" title="separation {f.separation:.2f}">'
        f'<span style="width:{max(0.0, f.separation) * 100:.0f}%"></span></span></li>'
        for i, f in shown
    )
    notes = "".join(f"<li>{escape(note)}</li>" for note in group.notes)
    colours = palette.of_group(group.category)
    return (
        f'<div class="group" data-focus="g-{escape(group.category)}">'
        f"{_chip(group.category, colours)} <b>{len(group.failing)} failing</b>"
        + (f"<ol>{items}</ol>" if items else '<p class="muted">nothing separates these cells</p>')
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
        + "</div>"
    )


def _comparison(c: Comparison) -> str:
    kinds = (
        ("regressions", "regression", "regressions"),
        ("fixes", "fix", "fixes"),
        ("changed", "changed failure", "changed failures"),
        ("added", "new cell", "new cells"),
        ("removed", "cell gone", "cells gone"),
    )
    counts = " · ".join(
        f"<b>{n}</b> {one if n == 1 else many}" for name, one, many in kinds for n in [len(getattr(c, name))]
    )
    env = "".join(
        f"<tr><td>{escape(name)}</td><td>{escape(before or '–')}</td><td>{escape(after or '–')}</td></tr>"
        for name, (before, after) in c.env_diff.items()
    )
    notes = "".join(f'<p class="note">{escape(note)}</p>' for note in c.notes)
    notes += "".join(
        f'<p class="note">speed: {escape(s.label)}: {s.before.median:.0f} → {s.after.median:.0f} output tok/s '
        f"({s.change:+.1%}, beyond both sweeps' noise)</p>"
        for s in (*c.speed_regressions, *c.speed_improvements)
    )
    return (
        f'<section class="compare"><h2>Against baseline <span class="muted">{escape(c.before_id)}</span></h2>'
        f"<p>{counts} ({c.matched} cells matched). Marked on the cells below.</p>"
        + (f'<table class="env"><tr><th>changed</th><th>baseline</th><th>now</th></tr>{env}</table>' if env else "")
        + notes
        + "</section>"
    )


def _legend(results: Sequence[CellResult], palette: Palette, grid: Layout, marks: dict[str, dict[str, Any]]) -> str:
    items = "".join(_chip(key, colours, focus=f"k-{key}") for key, colours in palette.colours.items())
    if isinstance(palette, SpeedPalette):
        items += "".join(_chip(text, colours) for text, colours in palette.scale)
    if any(r.flaky for r in results):
        items += '<span class="chip flaky" style="--c:#999;--t:#fff">flaky</span>'
    if any(len(f.cells) < len(grid.rows) * len(grid.columns) for f in grid.facets):
        items += '<span class="chip gap">not in the matrix</span>'
    kinds = {mark["kind"] for mark in marks.values()}
    items += "".join(
        f'<span class="mark m-{kind}" title="{escape(_MARK_HELP[kind])}">{escape(text)}</span>'
        for kind, text in _MARK_TEXT.items()
        if kind in kinds
    )
    return f'<div class="legend">{items}</div>'


def _grids(grid: Layout, results: Sequence[CellResult], palette: Palette, marks: dict[str, dict[str, Any]]) -> str:
    facets = f" · one grid per {' × '.join(map(escape, grid.facet_axes))}" if grid.facet_axes else ""
    parts = [f'<p class="axes">{escape(grid.why)}{facets}</p><div class="facets">']
    span = len(grid.columns)
    x_head = f'<tr><th></th><th class="xname" colspan="{span}">{escape(grid.x)} →</th></tr>' if grid.x else ""
    head = "".join(f"<th>{escape(c)}</th>" for c in grid.columns)
    for facet in grid.facets:
        rows = []
        for row in grid.rows:
            cells = "".join(
                _cell(facet.cells[(row, column)], results, palette, marks)
                if (row, column) in facet.cells
                else '<td class="empty" title="not in the matrix"></td>'
                for column in grid.columns
            )
            rows.append(f"<tr><th>{escape(row)}</th>{cells}</tr>")
        title = " · ".join(f'<span class="k">{escape(a)}</span>=<b>{escape(v)}</b>' for a, v in facet.shown)
        caption = f"<caption>{title}</caption>" if grid.facet_axes else ""
        label = escape(facet.title or "all cells")
        parts.append(
            f'<table class="grid" aria-label="{label}">{caption}<thead>{x_head}'
            f'<tr><th class="yname">{escape(grid.y or "")} ↓</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    parts.append("</div>")
    if grid.beside:
        buttons = "".join(
            f"<li>{_cell(i, results, palette, marks, tag='span')}"
            f'<span class="label">{escape(results[i].cell.label)}</span></li>'
            for i in grid.beside
        )
        parts.append(
            f'<div class="beside"><h3>Added by <code>include:</code> (no combination of the grid\'s axes)</h3>'
            f'<ul class="beside">{buttons}</ul></div>'
        )
    return "".join(parts)


def _cell(
    index: int, results: Sequence[CellResult], palette: Palette, marks: dict[str, dict[str, Any]], tag: str = "td"
) -> str:
    result = results[index]
    key = colour_key(result)
    bg, fg = palette.of(result)
    mark = marks.get(result.cell.cell_id)
    kind = mark["kind"] if mark else ""
    classes = " ".join(c for c in ("cell", "flaky" if result.flaky else "", f"m-{kind}" if kind else "") if c)
    main = key
    sub = result.phase.value if result.phase and result.status is not None and key != "pass" else ""
    if key == "pass" and result.ready_s is not None:
        sub = f"ready {result.ready_s:.1f} s"
    if isinstance(palette, SpeedPalette):
        sub = palette.sub(result) or sub
    tip = f"{result.cell.label}\n{status_text(result)}: {root_cause_excerpt(result, 200)}".strip()
    badge = f'<span class="badge">{escape(_MARK_TEXT[kind])}</span>' if kind else ""
    return (
        f'<{tag}><button type="button" class="{classes}" data-cell="{index}" '
        f'data-keys="k-{escape(key)} g-{escape(group_of(result))}" '
        f'style="--c:{bg};--t:{fg}" title="{escape(tip)}">'
        f'<span class="main">{_breakable(main)}</span><span class="sub">{escape(sub)}</span>{badge}</button></{tag}>'
    )


def _breakable(name: str) -> str:
    """Escaped, with a line-break opportunity after each underscore: `illegal_memory_access` wraps between words."""
    return escape(name).replace("_", "_<wbr>")


def _table(results: Sequence[CellResult], palette: Palette) -> str:
    axes = axis_columns(results)
    head = "".join(f"<th>{escape(a)}</th>" for a in [*axes, "status", "phase", "category", "root cause", "attempts"])
    rows = []
    for index, r in enumerate(results):
        bg, fg = palette.of(r)
        values = "".join(f"<td>{escape(axis_value(r, a))}</td>" for a in axes)
        rows.append(
            f'<tr data-cell="{index}">{values}<td><span class="chip" style="--c:{bg};--t:{fg}">'
            f"{escape(status_text(r))}</span></td><td>{escape(r.phase.value if r.phase else '–')}</td>"
            f"<td>{escape(r.category.value if r.category else '–')}</td>"
            f"<td><code>{escape(root_cause_excerpt(r, 120))}</code></td><td>{escape(r.attempts_text)}</td></tr>"
        )
    return (
        f'<details class="all"><summary>All {len(results)} cells as a table</summary>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></details>"
    )
