"""Pure: the cells a strategy starts from, and the cost line `validate` and `sweep` print before launching."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.matrix.cost import Strategy, default_strategy, estimate
from orchestrator.matrix.covering import covering_cells
from orchestrator.model import Cell
from orchestrator.settings import Deadlines

PROBES = 5
"""Greedy, sampled, stream, concurrent, alive-after: each bounded by the probe deadline."""


def axis_values(cells: Sequence[Cell]) -> dict[str, list[str]]:
    """Axis name -> its values as text, in first-seen order (the install counts as an axis when it varies)."""
    axes: dict[str, list[str]] = {}
    for cell in cells:
        for name, value in _values(cell).items():
            seen = axes.setdefault(name, [])
            if value not in seen:
                seen.append(value)
    return {name: values for name, values in axes.items() if len(values) > 1}


def _values(cell: Cell) -> dict[str, str]:
    values = {name: str(cell.flags.get(name)) for name in cell.axes}
    if cell.install is not None:
        values["install"] = cell.install
    return values


def starting_cells(strategy: Strategy, valid: Sequence[Cell], already_run: Sequence[Cell] = ()) -> list[Cell]:
    """`full`: every valid cell; `pairwise` and `adaptive`: a strength-2 covering subset of them."""
    if strategy == "full":
        return list(valid)
    axes = axis_values(valid)
    chosen = covering_cells(axes, [_values(c) for c in valid], [_values(c) for c in already_run])
    return [valid[i] for i in chosen]


def worst_case_s(deadlines: Deadlines) -> float:
    """The longest one launch may take under its deadlines: startup, every probe, the stop."""
    return deadlines.ready + PROBES * deadlines.probe + deadlines.stop_grace + deadlines.gpu_release


def cost_line(
    matrix_cells: int,
    valid: Sequence[Cell],
    deadlines: Deadlines,
    strategy: Strategy | None = None,
    past_durations_s: Sequence[float] = (),
) -> str:
    """`648 cells; strategy adaptive (the default above 64 cells): starts with 15 cells, about 3.9 h ...`."""
    chosen: Strategy = strategy or default_strategy(matrix_cells)
    why = " (the default for this size)" if strategy is None else ""
    start = starting_cells(chosen, valid)
    cost = estimate(len(start), past_durations_s, worst_case_s(deadlines))
    more = ", plus the cells localisation adds" if chosen == "adaptive" else ""
    return f"{matrix_cells} cells; strategy {chosen}{why}: launches {cost.text()}{more}"
