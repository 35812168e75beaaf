"""What a sweep will cost before it launches anything: cells, wall time, and where the per-cell figure comes from.

The per-cell time is the median of past launches of the same model on the same host (the store
keeps them); without any, a simulated host's scenario timing (it costs what its file says), else the
worst case the deadlines allow. Packing divides the wall time by the launches that fit side by side.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from orchestrator.config.model import HostConfig
from orchestrator.errors import OrchestratorError
from orchestrator.matrix.cost import Estimate, Strategy, estimate
from orchestrator.model import Cell, Status
from orchestrator.planning.strategy import worst_case_s
from orchestrator.settings import Deadlines
from orchestrator.sim.scenario import load_scenario
from orchestrator.store.records import PastRun
from orchestrator.sweep.preflight import Preflight

SIM_OVERHEAD_S = 1.5
"""Probes, stop and GPU release of one simulated launch, beyond its scenario's startup phases."""


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


def past_durations(history: Sequence[PastRun], model: object) -> list[float]:
    """Seconds each past launch of this model took on the host (launched runs that reached pass or fail)."""
    found = []
    for past in history:
        run, verdict = past.run, past.run.verdict
        if run.run_dir is None or run.ended_at is None or verdict is None:
            continue
        if verdict.status in (Status.PASS, Status.FAIL) and past.cell.flags.get("model-path") == model:
            found.append(max(0.0, run.ended_at - run.started_at))
    return found


def per_launch_fallback_s(host: HostConfig, deadlines: Deadlines) -> tuple[float, str]:
    """Without past runs: a simulated host's own timing, else the worst case of the deadlines."""
    if host.scenario:
        try:
            timing = load_scenario(host.scenario)[0].timing
        except OrchestratorError:
            return worst_case_s(deadlines), "deadlines"
        startup = (
            timing.import_s + timing.init_s + timing.load_weights_s + timing.memory_alloc_s
            + timing.capture_cuda_graph_s + timing.warmup_s
        )  # fmt: skip
        return startup + SIM_OVERHEAD_S, "the simulated host's timing"
    return worst_case_s(deadlines), "deadlines"


def launch_estimate(
    cells: int, host: HostConfig, deadlines: Deadlines, history: Sequence[PastRun], sample: Sequence[Cell], packed: bool
) -> Estimate:
    """The wall time of launching `cells` cells like `sample` on `host`."""
    model = sample[0].flags.get("model-path") if sample else None
    widest = max((c.tp_size for c in sample), default=1)
    parallel = max(1, host.gpus // widest) if packed else 1
    durations = past_durations(history, model)
    if durations:
        return estimate(cells, durations, 0.0, parallel)
    per_cell, source = per_launch_fallback_s(host, deadlines)
    return Estimate(cells, per_cell, source, parallel)


def plan_estimate(
    start: Preflight,
    proofs: Collection[str],
    most: int | None,
    host: HostConfig,
    hosts: int,
    deadlines: Deadlines,
    history: Sequence[PastRun],
    packed: bool,
) -> Estimate:
    """The wall time of what a sweep will launch (its first cells, or up to `most`), on `hosts` hosts like `host`."""
    first = len([p for p in start.valid if p.cell.cell_id not in proofs])
    cells = max(first, most) if most is not None else first
    sample = [p.cell for p in start.valid] or [p.cell for p in start.plans]
    found = launch_estimate(cells, host, deadlines, history, sample, packed)
    return replace(found, parallel=found.parallel * max(1, hosts))
