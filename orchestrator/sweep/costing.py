"""What a sweep will cost before it launches anything: cells, wall time, and where the per-cell figure comes from
(planning/estimate.py works it out; this reads what it needs: a simulated host's scenario file)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from orchestrator.config.model import HostConfig
from orchestrator.errors import OrchestratorError
from orchestrator.matrix.cost import Estimate
from orchestrator.model import Cell
from orchestrator.planning.estimate import launch_estimate
from orchestrator.settings import Deadlines, LoadSettings
from orchestrator.sim.scenario import load_scenario
from orchestrator.store.records import PastRun
from orchestrator.sweep.preflight import Preflight


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
