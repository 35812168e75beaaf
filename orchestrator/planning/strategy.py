"""Pure: the cells a strategy starts from, and the cost line `validate` and `sweep` print before launching."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.matrix.cost import Strategy, default_strategy, estimate
from orchestrator.matrix.covering import covering_cells
from orchestrator.model import Cell
from orchestrator.planning.estimate import worst_case_s
from orchestrator.settings import Deadlines, LoadSettings


def axis_values(cells: Sequence[Cell]) -> dict[str, list[str]]:
    """Axis name -> its values as text, in first-seen order (the install counts as an axis when it varies)."""
    axes: dict[str, list[str]] = {}
    for cell in cells:
        for name, value in cell_values(cell).items():
            seen = axes.setdefault(name, [])
            if value not in seen:
                seen.append(value)
    return {name: values for name, values in axes.items() if len(values) > 1}


def cell_values(cell: Cell) -> dict[str, str]:
    """The cell's axis values as text (and its install), as the covering array and localisation see them."""
    values = {name: str(cell.flags.get(name)) for name in cell.axes}
    if cell.install is not None:
        values["install"] = cell.install
    return values


def starting_cells(strategy: Strategy, valid: Sequence[Cell], already_run: Sequence[Cell] = ()) -> list[Cell]:
    """`full`: every valid cell; `pairwise` and `adaptive`: a strength-2 covering subset of them."""
    if strategy == "full":
        return list(valid)
    axes = axis_values(valid)
    chosen = covering_cells(axes, [cell_values(c) for c in valid], [cell_values(c) for c in already_run])
    return [valid[i] for i in chosen]


def default_budget(matrix_cells: int, start: int, axes: int) -> int:
    """Cells an adaptive sweep launches at most without `--budget`: a tenth of the matrix, and at least
    the covering array plus a few cells per axis to localise with (small matrices)."""
    return max(matrix_cells // 10, start + 2 * axes)


def cost_line(
    matrix_cells: int,
    valid: Sequence[Cell],
    deadlines: Deadlines,
    strategy: Strategy | None = None,
    past_durations_s: Sequence[float] = (),
    load: LoadSettings | None = None,
) -> str:
    """`648 cells; strategy adaptive (the default above 64 cells): starts with 15 cells, about 3.9 h ...`."""
    chosen: Strategy = strategy or default_strategy(matrix_cells)
    why = " (the default for this size)" if strategy is None else ""
    start = starting_cells(chosen, valid)
    if chosen != "adaptive":
        cost = estimate(len(start), past_durations_s, worst_case_s(deadlines, load))
        return f"{matrix_cells} cells; strategy {chosen}{why}: launches {cost.text()}"
    most = min(len(valid), default_budget(matrix_cells, len(start), len(axis_values(valid))))
    cost = estimate(most, past_durations_s, worst_case_s(deadlines, load))
    return (
        f"{matrix_cells} cells; strategy adaptive{why}: launches at most {cost.text()}: "
        f"a covering array of {len(start)} cells, then the cells localisation picks (--budget)"
    )
