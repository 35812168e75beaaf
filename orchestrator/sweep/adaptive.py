"""The adaptive phase of a sweep: after the covering array, the cells that best split each failure's suspects.

Round after round, the verdicts stored so far become observations (planning/localise.py), the next cells are
picked from the matrix's valid cells (one changed suspected value each), added to the sweep in the
store, and run like any other cell. When nothing is left to split, the value pairs that only cells
failing for an explained cause held (a failure hides what comes after it) are covered again. It ends
when every failure category is explained by a confirmed cause and every testable pair was tested, when
no valid cell can split what is left, or when the budget of launched cells is spent.
Every decision is a function of the stored verdicts, so a resumed sweep picks the same cells again
and never relaunches one that has its verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.model import Status
from orchestrator.planning.cells import CellPlan
from orchestrator.planning.localise import PASS, Observed, cover_cells, next_cells, unexplained
from orchestrator.planning.strategy import axis_values, cell_values
from orchestrator.store.results import CellResult
from orchestrator.store.sqlite import Store

ORIGIN_LOCALISE = "localise"
Stop = Literal["explained", "budget", "stuck", "stopped"]
STOP_TEXT: dict[str, str] = {
    "explained": "nothing left to localise: every failure seen has a confirmed cause",
    "budget": "the budget of launched cells ran out",
    "stuck": "no valid cell is left that could split the remaining candidates",
    "stopped": "the sweep stopped after an infra failure",
}


@dataclass(frozen=True)
class Space:
    """The valid cells of the whole matrix, in matrix order: what localisation may pick from."""

    plans: tuple[CellPlan, ...]

    @property
    def values(self) -> list[dict[str, str]]:
        """Each cell's axis values as text."""
        return [cell_values(p.cell) for p in self.plans]

    @property
    def axes(self) -> dict[str, list[str]]:
        """Axis name -> its values."""
        return axis_values([p.cell for p in self.plans])


@dataclass(frozen=True)
class AdaptiveEnd:
    """How the adaptive phase ended."""

    stop: Stop
    spent: int
    budget: int
    rounds: int

    def to_dict(self) -> dict[str, object]:
        """What the sweep's settings keep of it (read by the table line and by explain)."""
        return {"stop": self.stop, "spent": self.spent, "budget": self.budget, "rounds": self.rounds}


def outcome(result: CellResult) -> str | None:
    """A verdict as an observation: `pass`, the failure category, `other` (flaky), or None (says nothing)."""
    if result.status is Status.PASS:
        return PASS
    if result.flaky:
        return "other"
    if result.status in (Status.FAIL, Status.INVALID) and result.category is not None:
        return result.category.value
    if result.status is Status.SKIPPED and result.category is not None and result.category.value != "unknown":
        return result.category.value  # known bad: a past sweep's verdict on this host and version
    return None


def observations(results: Sequence[CellResult], space: Space) -> list[Observed]:
    """The verdicts so far of the cells in the space."""
    ids = {p.cell.cell_id for p in space.plans}
    found = []
    for result in results:
        seen = outcome(result)
        if seen is not None and result.cell.cell_id in ids:
            found.append(Observed(cell_values(result.cell), seen))
    return found


def localise_rounds(
    store: Store,
    sweep_id: str,
    retries: int,
    space: Space,
    budget: int,
    free: Collection[str],
    launch: Callable[[list[CellPlan], str], bool],
) -> AdaptiveEnd:
    """Pick, add and run cells until the failures are explained, nothing splits them, or the budget is spent.

    `free` names the cells that cost no launch (known bad: skipped); `launch` runs plans already added to
    the sweep and says whether the sweep stopped.
    """
    axes, values = space.axes, space.values
    by_id = {p.cell.cell_id: p for p in space.plans}
    rounds = 0
    while True:
        results = store.cell_results(sweep_id, retries)
        in_sweep = {r.cell.cell_id for r in results}
        spent = len([i for i in in_sweep if i in by_id and i not in free])
        observed = observations(results, space)
        # Split the suspects first; once nothing is left to split, test the pairs a failure hid.
        picks = [space.plans[i] for i in next_cells(axes, values, observed)]
        picks = [p for p in picks if p.cell.cell_id not in in_sweep]
        why = "localisation"
        if not picks:
            picks = [space.plans[i] for i in cover_cells(axes, values, observed)]
            picks = [p for p in picks if p.cell.cell_id not in in_sweep]
            why = "coverage: pairs an earlier failure hid"
        if not picks:
            stop: Stop = "stuck" if unexplained(observed, list(axes)) else "explained"
            return AdaptiveEnd(stop, spent, budget, rounds)
        room = budget - spent
        if room <= 0:
            return AdaptiveEnd("budget", spent, budget, rounds)
        picks = picks[:room]
        store.add_cells(sweep_id, [p.cell for p in picks], ORIGIN_LOCALISE)
        rounds += 1
        if launch(picks, why):
            return AdaptiveEnd("stopped", spent + len(picks), budget, rounds)
