"""Pure: the cells a strategy starts from, and the cost of that plan that `validate` and `sweep` print before
launching."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from orchestrator.matrix.cost import Estimate, Strategy, default_strategy
from orchestrator.matrix.covering import covering_cells
from orchestrator.model import Cell


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


@dataclass(frozen=True)
class LaunchCost:
    """The plan of a sweep as `validate` and `sweep` print it before launching, and the figure `--max-hours` is held
    to."""

    matrix_cells: int
    strategy: Strategy
    by_default: bool
    start: int
    """Cells launched first (every valid one for full; the covering array otherwise), known-bad ones left out."""
    most: int
    """Cells launched at most (adaptive: the budget)."""
    known_bad: int
    invalid: int
    estimate: Estimate

    @classmethod
    def of(
        cls,
        matrix_cells: int,
        strategy: Strategy,
        by_default: bool,
        start: Sequence[str],
        invalid: int,
        proofs: Collection[str],
        budget: int | None,
        estimate: Estimate,
    ) -> LaunchCost:
        """The cost of a plan: its first cells (`start`, their ids) less the known-bad ones (`proofs`)."""
        first = [cell_id for cell_id in start if cell_id not in proofs]
        most = max(len(first), budget) if budget is not None else len(first)
        return cls(matrix_cells, strategy, by_default, len(first), most, len(start) - len(first), invalid, estimate)

    def text(self) -> str:
        """`648 cells; strategy adaptive (the default above 64 cells): launches at most 64 cells, about ...`."""
        why = " (the default for this size)" if self.by_default else ""
        head = f"{self.matrix_cells} cell{'s' * (self.matrix_cells != 1)}; strategy {self.strategy}{why}: "
        if self.strategy == "adaptive":
            head += (
                f"launches at most {self.estimate.text()}: a covering array of {self.start}, then the cells "
                "localisation picks (--budget)"
            )
        else:
            head += f"launches {self.estimate.text()}"
        extra = [f"{self.invalid} invalid (rejected before launch)"] if self.invalid else []
        if self.known_bad:
            extra.append(f"{self.known_bad} known bad from past sweeps (skipped; --retry-known-bad runs them)")
        return head + (f"; {', '.join(extra)}" if extra else "")


def planned_cost(
    matrix_cells: int,
    valid: Sequence[Cell],
    invalid: int,
    strategy: Strategy | None,
    budget: int | None,
    proofs: Collection[str],
    estimate_of: Callable[[int], Estimate],
) -> LaunchCost:
    """The cost of the plan a sweep of these cells starts with: the strategy's first cells, less the known-bad ones,
    up to the adaptive budget; `estimate_of(cells)` times that many launches (past runs, a simulated host, else the
    deadlines: planning/estimate.py)."""
    chosen: Strategy = strategy or default_strategy(matrix_cells)
    start = [c.cell_id for c in starting_cells(chosen, valid)]
    most = None
    if chosen == "adaptive":
        most = (
            budget
            if budget is not None
            else min(len(valid), default_budget(matrix_cells, len(start), len(axis_values(valid))))
        )
    cost = LaunchCost.of(matrix_cells, chosen, strategy is None, start, invalid, proofs, most, Estimate(0, 0.0, ""))
    return replace(cost, estimate=estimate_of(cost.most))
