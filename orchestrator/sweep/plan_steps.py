"""The steps a sweep's plan takes besides running cells: known-bad cells skipped, the budget, localisation.

Kept apart from engine.py, which strings the steps together: each takes the store and plain values,
and runs cells only through the callable it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.classify.unlaunched import known_bad_verdict
from orchestrator.config.model import HostConfig
from orchestrator.matrix.cost import Strategy
from orchestrator.model import Cell
from orchestrator.planning.cells import CellPlan
from orchestrator.planning.known_bad import Proof, known_bad
from orchestrator.planning.strategy import LaunchCost, axis_values, default_budget, planned_cost
from orchestrator.settings import Deadlines, LoadSettings
from orchestrator.store.sqlite import Store
from orchestrator.sweep.adaptive import Space, localise_rounds
from orchestrator.sweep.cell_run import AttemptResult, record_unlaunched
from orchestrator.sweep.costing import host_estimate
from orchestrator.sweep.preflight import Preflight
from orchestrator.sweep.scheduler import Job

RunJobs = Callable[[list[Job]], bool]
"""Runs jobs to their verdicts; True when an infra verdict stopped the sweep."""


def proofs_for(store: Store, host: str, preflight: Preflight, retry: bool, sweep_id: str) -> dict[str, Proof]:
    """The valid cells past sweeps proved bad on this host, version and GPU (none with --retry-known-bad)."""
    if retry:
        return {}
    valid = [p.cell for p in preflight.valid]
    history = store.host_history(host, [c.cell_id for c in valid])
    return known_bad(valid, history, preflight.versions, preflight.host_facts, exclude_sweep=sweep_id)


def adaptive_budget(given: int | None, matrix_cells: int, preflight: Preflight, start: Preflight) -> int:
    """`--budget`, else the default for the matrix's size, never more than the valid cells."""
    if given is not None:
        return given
    axes = len(axis_values([p.cell for p in preflight.valid]))
    return min(len(preflight.valid), default_budget(matrix_cells, len(start.valid), axes))


class Launcher:
    """Runs jobs on the host; cells proven bad by past sweeps are recorded skipped instead of launched."""

    def __init__(
        self,
        store: Store,
        sweep_id: str,
        host: str,
        on_result: Callable[[AttemptResult], None] | None,
        proofs: dict[str, Proof],
        run_jobs: RunJobs,
    ):
        self.store, self.sweep_id, self.host, self.on_result = store, sweep_id, host, on_result
        self.proofs = proofs
        self.run_jobs = run_jobs

    def __call__(self, jobs: list[Job]) -> bool:
        """Run the jobs to their verdicts; True when an infra verdict stopped the sweep."""
        last = {r.cell_id: r for r in self.store.runs(self.sweep_id)}
        launch = []
        for job in jobs:
            proof = self.proofs.get(job.plan.cell.cell_id)
            if proof is None:
                launch.append(job)
                continue
            run = last.get(job.plan.cell.cell_id)
            if run is not None and run.verdict is not None and run.verdict.reason == proof.reason:
                continue  # skipped already, before this sweep was resumed
            self._skip(job.plan.cell, proof)
        return self.run_jobs(launch) if launch else False

    def _skip(self, cell: Cell, proof: Proof) -> None:
        proven = proof.past.run.verdict
        assert proven is not None  # a proof is made of a verdict
        verdict = known_bad_verdict(proof.reason, proven)
        record_unlaunched(self.store, self.sweep_id, self.host, cell, verdict, self.on_result)


def adapt(
    store: Store,
    sweep_id: str,
    retries: int,
    preflight: Preflight,
    budget: int,
    run: Launcher,
    on_grow: Callable[[list[Cell], str], None],
) -> bool:
    """The adaptive phase over the matrix's valid cells; records how it ended; True when the sweep stopped."""

    def launch(plans: list[CellPlan], why: str) -> bool:
        on_grow([p.cell for p in plans], why)
        return run([Job(p, 1) for p in plans])

    space = Space(tuple(preflight.valid))
    end = localise_rounds(store, sweep_id, retries, space, budget, set(run.proofs), launch)
    store.update_sweep_settings(sweep_id, {"adaptive": end.to_dict()})
    return end.stop == "stopped"


def plan_cost(
    store: Store | None,
    host: HostConfig,
    deadlines: Deadlines,
    preflight: Preflight,
    strategy: Strategy | None,
    *,
    budget: int | None = None,
    packed: bool = True,
    retry_known_bad: bool = False,
    load: LoadSettings | None = None,
) -> LaunchCost:
    """What `validate --host` prints: the cost of the plan a sweep of these cells would start with."""
    proofs = proofs_for(store, host.name, preflight, retry_known_bad, "") if store is not None else {}
    history = store.host_history(host.name) if store is not None else []
    valid = [p.cell for p in preflight.valid]
    return planned_cost(
        len(preflight.plans), valid, len(preflight.invalid), strategy, budget, proofs,
        lambda cells: host_estimate(cells, host, deadlines, history, valid, packed, load),
    )  # fmt: skip
