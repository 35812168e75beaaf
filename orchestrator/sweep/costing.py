"""What a sweep will cost before it launches anything: cells, wall time, and where the per-cell figure comes from
(planning/estimate.py works it out; this reads what it needs: a simulated host's scenario file)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from orchestrator.config.model import HostConfig
from orchestrator.errors import OrchestratorError
from orchestrator.matrix.cost import Estimate, Strategy
from orchestrator.model import Cell
from orchestrator.planning.estimate import launch_estimate
from orchestrator.settings import Deadlines, LoadSettings
from orchestrator.sim.scenario import load_scenario
from orchestrator.store.records import PastRun
from orchestrator.sweep.preflight import Preflight


@dataclass(frozen=True)
class LaunchCost:
    """The plan of a sweep as `sweep` prints it before launching, and the figure `--max-hours` is held to."""

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
        start: Preflight,
        proofs: Collection[str],
        budget: int | None,
        estimate_: Estimate,
    ) -> LaunchCost:
        """The cost of a plan: its first cells (`start`, preflight's verdicts on them) less the known-bad ones."""
        first = [p for p in start.valid if p.cell.cell_id not in proofs]
        known = len(start.valid) - len(first)
        most = max(len(first), budget) if budget is not None else len(first)
        return cls(matrix_cells, strategy, by_default, len(first), most, known, len(start.invalid), estimate_)

    def text(self) -> str:
        """`648 cells; strategy adaptive (the default above 64 cells): launches at most 64 cells, about ...`."""
        why = " (the default for this size)" if self.by_default else ""
        head = f"{self.matrix_cells} cells; strategy {self.strategy}{why}: "
        if self.strategy == "adaptive":
            head += f"launches at most {self.estimate.text()}: a covering array of {self.start}, then localisation"
        else:
            head += f"launches {self.estimate.text()}"
        extra = [f"{self.invalid} invalid (rejected before launch)"] if self.invalid else []
        if self.known_bad:
            extra.append(f"{self.known_bad} known bad from past sweeps (skipped; --retry-known-bad runs them)")
        return head + (f"; {', '.join(extra)}" if extra else "")


class CostRefused(OrchestratorError):
    """The sweep would take longer than the user allowed, and nobody confirmed it."""


def host_estimate(
    cells: int,
    host: HostConfig,
    deadlines: Deadlines,
    history: Sequence[PastRun],
    sample: Sequence[Cell],
    packed: bool,
    load: LoadSettings | None,
) -> Estimate:
    """launch_estimate for `host`, with its scenario when it is simulated (one that does not load: the deadlines)."""
    try:
        simulated = load_scenario(host.scenario)[0] if host.scenario else None
    except OrchestratorError:
        simulated = None
    return launch_estimate(cells, host.gpus, deadlines, history, sample, packed, load, simulated)


def plan_estimate(
    start: Preflight,
    proofs: Collection[str],
    most: int | None,
    host: HostConfig,
    hosts: int,
    deadlines: Deadlines,
    history: Sequence[PastRun],
    packed: bool,
    load: LoadSettings | None,
) -> Estimate:
    """The wall time of what a sweep will launch (its first cells, or up to `most`), on `hosts` hosts like `host`."""
    first = len([p for p in start.valid if p.cell.cell_id not in proofs])
    cells = max(first, most) if most is not None else first
    sample = [p.cell for p in start.valid] or [p.cell for p in start.plans]
    found = host_estimate(cells, host, deadlines, history, sample, packed, load)
    return replace(found, parallel=found.parallel * max(1, hosts))
