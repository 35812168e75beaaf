"""Where each cell of a sweep sits on the report's heat-map, its colour and what it shows. Pure.

Two axes span a grid (columns and rows); every other axis that varies splits the cells into facets,
one small grid per combination of its values that the sweep holds. Every facet has the same columns
and rows, so the eye can compare facets; a position no cell fills (an excluded combination) stays empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from orchestrator.analysis.compare import Comparison
from orchestrator.analysis.explain import Explanation
from orchestrator.analysis.inputs import CellOutcome
from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.model import UNSET, Category, Status
from orchestrator.report.bugreport import shown_env
from orchestrator.report.table import axis_columns, status_text
from orchestrator.report.views import cell_outcome
from orchestrator.store.results import CellResult

MISSING = UNSET
"""How a value is shown where the cell leaves the flag out: `(unset)`, as in every other output."""
INSTALL = "install"


def axis_value(result: CellResult, axis: str) -> str:
    """The value of one axis in a cell, as the map labels it."""
    if axis == "host":
        return _label(result.cell.host)
    return _label(result.cell.install if axis == INSTALL else result.cell.flags.get(axis))


def _label(value: object) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _map_axes(results: Sequence[CellResult]) -> list[str]:
    """The table's axis columns; the host only as an axis of the matrix (which host of a pool ran a cell is not)."""
    return [a for a in axis_columns(results) if a != "host" or any(r.cell.host for r in results)]


def axis_values(results: Sequence[CellResult], axis: str) -> tuple[str, ...]:
    """The distinct values of an axis in first-seen (matrix) order."""
    return tuple(dict.fromkeys(axis_value(r, axis) for r in results))


@dataclass(frozen=True)
class Facet:
    """One small grid: the facet axes' values it holds and which result sits at (row, column)."""

    values: tuple[tuple[str, str], ...]
    cells: dict[tuple[str, str], int]
    """(row value, column value) -> index into the results."""

    @property
    def shown(self) -> tuple[tuple[str, str], ...]:
        """The values a title names: flags the cells leave out are dropped, unless that leaves nothing."""
        return tuple((a, v) for a, v in self.values if v != MISSING) or self.values

    @property
    def title(self) -> str:
        """`attention-backend=triton · kv-cache-dtype=bf16`, empty for the only facet of a plain grid."""
        return " · ".join(f"{axis}={value}" for axis, value in self.shown)


@dataclass(frozen=True)
class Layout:
    """The heat-map: which axes span the grids, which split them into facets, and why those."""

    x: str | None
    y: str | None
    facet_axes: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[str, ...]
    facets: tuple[Facet, ...]
    why: str
    beside: tuple[int, ...] = ()
    """Results listed beside the grids: cells an `include:` entry added that are no combination of the axes."""


def _explained_axes(explanation: Explanation, varying: Sequence[str]) -> list[str]:
    """Axes named by the findings, best first: what separates failures is what the grid should spread out."""
    by_canonical = {canonical_name(a) if a != INSTALL else INSTALL: a for a in varying}
    named: list[str] = []
    for finding in explanation.findings:
        for flag in finding.flags:
            axis = by_canonical.get(flag)
            if axis is not None and axis not in named:
                named.append(axis)
    return named


def matrix_axes(matrix_yaml: str) -> dict[str, tuple[str, ...]] | None:
    """The axes the matrix multiplies (canonical names) and their values as the map labels them; None if unreadable.

    An `include:` entry may add a flag to some combinations (a sampling backend only for the DSA
    attention backend): that flag is no axis of the grid, or every grid would be doubled with empty halves.
    """
    try:
        doc = yaml.safe_load(matrix_yaml)
    except yaml.YAMLError:
        return None
    section = doc.get("matrix") if isinstance(doc, dict) else None
    if not isinstance(section, dict):
        return None
    axes: dict[str, tuple[str, ...]] = {}
    for name, values in section.items():
        if name in ("include", "exclude") or not isinstance(values, list):
            continue
        canonical = canonical_name(str(name))
        axes[canonical] = tuple(_label(canonical_value(canonical, v)) for v in values if not isinstance(v, dict))
    return axes


def include_only(results: Sequence[CellResult], axes: dict[str, tuple[str, ...]] | None) -> list[int]:
    """Indexes of the cells that are no combination of the matrix axes (added whole by an `include:` entry)."""
    if not axes:
        return []
    return [
        i
        for i, result in enumerate(results)
        if any(axis not in result.cell.axes or axis_value(result, axis) not in values for axis, values in axes.items())
    ]


def choose_axes(
    results: Sequence[CellResult],
    explanation: Explanation,
    x: str | None = None,
    y: str | None = None,
    *,
    allowed: Sequence[str] | None = None,
) -> tuple[str | None, str | None, str]:
    """The column and row axes (among `allowed` unless named), and how each was chosen; ValueError for unknown axes."""
    axes = _map_axes(results)
    for name in (x, y):
        if name is not None and name not in axes:
            raise ValueError(f"this sweep has no axis {name!r} (its axes: {', '.join(axes) or 'none'})")
    if x is not None and x == y:
        raise ValueError(f"--x and --y are both {x!r}: pick two different axes")
    reasons = {a: option for a, option in ((x, "--x"), (y, "--y")) if a is not None}
    candidates = [a for a in axes if allowed is None or a in allowed or a in (INSTALL, "host")] or axes
    varying = [a for a in candidates if len(axis_values(results, a)) > 1]
    named = _explained_axes(explanation, varying)
    by_size = sorted(varying, key=lambda a: -len(axis_values(results, a)))
    # Constant axes spread nothing out; they make the grid only when nothing varies (a one-cell sweep).
    free = [a for a in dict.fromkeys([*named, *by_size] or candidates) if a not in (x, y)]
    if x is None:
        x = free.pop(0) if free else None
    if y is None:
        y = free.pop(0) if free else None
    for axis in named:
        reasons.setdefault(axis, "a top finding names it")
    why = " · ".join(
        f"{side}: {axis} ({reasons.get(axis, 'most values')})" for side, axis in (("columns", x), ("rows", y)) if axis
    )
    return x, y, why


def layout(
    results: Sequence[CellResult],
    x: str | None,
    y: str | None,
    why: str = "",
    *,
    allowed: Sequence[str] | None = None,
    beside: Sequence[int] = (),
) -> Layout:
    """Place every result on a grid of `x` by `y`, one facet per combination of the other varying axes.

    `allowed` limits the facet axes (to the matrix's own, the install and the host); the results at
    `beside` are left off the grids.
    """
    placed = [r for i, r in enumerate(results) if i not in beside] or list(results)
    facet_axes = tuple(
        a
        for a in _map_axes(placed)
        if a not in (x, y)
        and (allowed is None or a in allowed or a in (INSTALL, "host"))
        and len(axis_values(placed, a)) > 1
    )
    columns = axis_values(placed, x) if x else ("",)
    rows = axis_values(placed, y) if y else ("",)
    facets: dict[tuple[tuple[str, str], ...], dict[tuple[str, str], int]] = {}
    for index, result in enumerate(results):
        if index in beside:
            continue
        key = tuple((a, axis_value(result, a)) for a in facet_axes)
        row = axis_value(result, y) if y else ""
        column = axis_value(result, x) if x else ""
        facets.setdefault(key, {})[(row, column)] = index
    return Layout(
        x=x,
        y=y,
        facet_axes=facet_axes,
        columns=columns,
        rows=rows,
        facets=tuple(Facet(values, cells) for values, cells in facets.items()),
        why=why,
        beside=tuple(beside),
    )


PASS_COLOUR = "#1a9850"
STATUS_COLOURS = {"invalid": "#f2c14e", "infra": "#6c7a89", "skipped": "#d5d9de", "not run": "#eceff2"}
CATEGORY_COLOURS: dict[str, str] = {
    # Fixed per category, so a category keeps its colour from one report to the next (last night's red is
    # tonight's red); none is the pass green, the invalid amber or the infra grey. Related causes share a hue.
    Category.NAN_IN_PROBS.value: "#d73027",
    Category.CUDA_DEVICE_ASSERT.value: "#f46d43",
    Category.ILLEGAL_MEMORY_ACCESS.value: "#a50026",
    Category.WRONG_OUTPUT.value: "#e7298a",
    Category.CUDA_OOM.value: "#8e44ad",
    Category.KV_CACHE_TOO_SMALL.value: "#c39bd3",
    Category.GPU_MEMORY_IN_USE.value: "#54278f",
    Category.UNSUPPORTED_CONFIG.value: "#2c7bb6",
    Category.INVALID_ARGUMENT.value: "#92c5de",
    Category.KERNEL_NOT_SUPPORTED_ON_ARCH.value: "#c51b7d",
    Category.KERNEL_JIT_ERROR.value: "#f1b6da",
    Category.CUDA_GRAPH_CAPTURE_FAILED.value: "#de77ae",
    Category.IMPORT_ERROR.value: "#8c510a",
    Category.WEIGHTS_LOAD_ERROR.value: "#bf812d",
    Category.TOKENIZER_OR_TEMPLATE_ERROR.value: "#543005",
    Category.NCCL_ERROR.value: "#35978f",
    Category.PORT_IN_USE.value: "#01665e",
    Category.HANG_OR_TIMEOUT.value: "#1b1b3a",
    Category.PROCESS_KILLED.value: "#762a83",
    Category.WARMUP_REQUEST_FAILED.value: "#e08214",
    Category.PYTHON_EXCEPTION_OTHER.value: "#4575b4",
    Category.UNKNOWN.value: "#7b7d2a",
}
FAIL_COLOURS = ("#d73027", "#f46d43", "#8e44ad", "#c51b7d", "#2c7bb6", "#8c510a", "#e7298a", "#4d4d4d", "#35978f")
"""For a category this release does not know (a store written by a newer one): picked by its name, not its order."""


def category_colour(key: str) -> str:
    """The fixed colour of a failure category; an unknown one's from its name, the same in every report."""
    known = CATEGORY_COLOURS.get(key)
    return known if known is not None else FAIL_COLOURS[sum(key.encode()) % len(FAIL_COLOURS)]


def colour_key(result: CellResult) -> str:
    """What colours a cell: `pass`, its failure category, or its status when it neither passed nor failed."""
    if result.status is None:
        return "not run"
    if result.status is Status.FAIL:
        return (result.category or Category.UNKNOWN).value
    return str(result.status.value)


def group_of(result: CellResult) -> str:
    """The explain group a cell falls in (`invalid_argument` for every invalid cell), `pass` for a pass."""
    if result.status is Status.INVALID:
        return Category.INVALID_ARGUMENT.value
    return colour_key(result)


def _text_on(background: str) -> str:
    red, green, blue = (int(background[i : i + 2], 16) for i in (1, 3, 5))
    return "#1d1d1f" if 0.299 * red + 0.587 * green + 0.114 * blue > 150 else "#ffffff"


@dataclass(frozen=True)
class Palette:
    """Background and text colour per colour key, in legend order: pass, failures commonest first, the rest.

    The order is the sweep's; the colours are fixed by key (CATEGORY_COLOURS), the same in every report.
    """

    colours: dict[str, tuple[str, str]]

    def of(self, result: CellResult) -> tuple[str, str]:
        """The colours of one cell."""
        return self.colours[colour_key(result)]

    def of_group(self, category: str) -> tuple[str, str]:
        """The colours of an explain group: the invalid cells' amber for `invalid_argument` unless a failure has it."""
        if category in self.colours:
            return self.colours[category]
        return self.colours.get("invalid", (FAIL_COLOURS[-1], "#ffffff"))


def palette_of(results: Sequence[CellResult]) -> Palette:
    """Colours for every key these results use."""
    counts = Counter(colour_key(r) for r in results)
    failures = sorted((k for k in counts if k not in STATUS_COLOURS and k != "pass"), key=lambda k: (-counts[k], k))
    colours: dict[str, str] = {"pass": PASS_COLOUR} if "pass" in counts else {}
    colours.update({k: category_colour(k) for k in failures})
    colours.update({k: c for k, c in STATUS_COLOURS.items() if k in counts})
    return Palette({k: (c, _text_on(c)) for k, c in colours.items()})


def _side(cell: CellOutcome | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    phase = cell.phase.value if cell.phase else None
    return {"status": cell.status.value, "category": cell.category.value, "phase": phase, "root": cell.root_cause_line}


def compare_marks(comparison: Comparison | None) -> dict[str, dict[str, Any]]:
    """Cell id (of this sweep) -> its mark against the baseline: kind and the baseline's outcome."""
    if comparison is None:
        return {}
    kinds = (
        ("regression", comparison.regressions),
        ("fix", comparison.fixes),
        ("changed", comparison.changed),
        ("added", comparison.added),
    )
    return {c.cell_id: {"kind": kind, "before": _side(c.before)} for kind, changes in kinds for c in changes}


def cell_data(result: CellResult, mark: dict[str, Any] | None) -> dict[str, Any]:
    """What the page's script shows for one cell: verdict, warnings, probes, the exact command, the mark."""
    run = next((r for r in result.runs if r.run_id == result.run_id), None)
    outcome = run.outcome if run else None
    probes = [
        {"name": p.name, "ok": p.ok, "latency_s": p.latency_s, "tokens": p.tokens, "error": p.error}
        for p in (outcome.probes if outcome else ())
    ]
    return {
        "label": result.cell.label,
        "cell_id": result.cell.cell_id,
        "run_id": result.run_id,
        "status": status_text(result),
        "phase": result.phase.value if result.phase else None,
        "category": result.category.value if result.category else None,
        # A pass's "root cause" is only the last healthy marker its log reached.
        "root": None if result.status is Status.PASS else result.root_cause_line,
        "reason": result.reason,
        "drift": [
            f"--{flag} asked {seen.get('asked')}, ran {seen.get('used')}: {seen.get('evidence')}"
            for flag, seen in result.drift.items()
        ],
        "attempts": result.attempts_text,
        "ready_s": result.ready_s,
        "warnings": list(cell_outcome(result).warnings),
        "probes": probes,
        "failed_probe": run.verdict.failed_probe if run and run.verdict else None,
        "command": run.command if run else None,
        "env": shown_env(run, result.cell) if run else {},
        "mark": mark,
        "traceback": _traceback(run.evidence if run else None, result.root_cause_line),
        "log": f"{run.host}:{run.run_dir}/server.log" if run and run.run_dir else None,
    }


def _traceback(evidence: dict[str, Any] | None, root: str | None) -> dict[str, Any] | None:
    """The traceback that raised the root cause (else the last one), with where it starts in the log."""
    tracebacks = [t for t in (evidence or {}).get("tracebacks", []) if isinstance(t, dict) and t.get("lines")]
    if not tracebacks:
        return None
    raised = [t for t in tracebacks if root and isinstance(t.get("exception"), str) and t["exception"] in root]
    chosen = (raised or tracebacks)[-1]
    return {"text": "\n".join(map(str, chosen["lines"])), "line": chosen.get("line_no"), "count": len(tracebacks)}
