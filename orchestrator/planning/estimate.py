"""Pure: how long a sweep's launches will take, before any is launched.

The per-cell time is the median of past launches of the same model on the same host (the store keeps them,
speed loads included); without any, a simulated host's scenario timing (it costs what its file says), else the
worst case the deadlines allow. Packing divides the wall time by the launches that fit side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from orchestrator.matrix.cost import Estimate
from orchestrator.model import Cell, Status
from orchestrator.settings import Deadlines, LoadSettings
from orchestrator.sim.scenario import Scenario
from orchestrator.store.records import PastRun

PROBES = 5
"""Greedy, sampled, stream, concurrent, alive-after: each bounded by the probe deadline."""
SIM_OVERHEAD_S = 1.5
"""Probes, stop and GPU release of one simulated launch, beyond its scenario's startup phases."""


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


def simulated_launch_s(scenario: Scenario, load: LoadSettings | None) -> float:
    """One launch on a simulated host: its startup phases, the speed load at its serving speed, the rest."""
    timing = scenario.timing
    startup = (
        timing.import_s + timing.init_s + timing.load_weights_s + timing.memory_alloc_s
        + timing.capture_cuda_graph_s + timing.warmup_s
    )  # fmt: skip
    if load is None:
        return startup + SIM_OVERHEAD_S
    tokens = load.repeat * load.requests * load.output_len
    # A `perf:` server shares its speed among the requests in flight; without it each decodes on its own.
    per_token_s = 1 / scenario.perf.tok_s if scenario.perf else timing.decode_token_s / max(1, load.concurrency)
    return startup + tokens * per_token_s + SIM_OVERHEAD_S


def worst_case_s(deadlines: Deadlines, load: LoadSettings | None = None) -> float:
    """The longest one launch may take under its deadlines: startup, every probe, the speed load, the stop."""
    probes = PROBES * deadlines.probe + load_worst_case_s(load, deadlines)
    return deadlines.ready + probes + deadlines.stop_grace + deadlines.gpu_release


def load_worst_case_s(load: LoadSettings | None, deadlines: Deadlines) -> float:
    """The longest the speed load may take: each wave of `concurrency` requests is held to the probe deadline."""
    if load is None:
        return 0.0
    waves = -(-load.requests // max(1, load.concurrency))
    return load.repeat * waves * deadlines.probe


def launch_estimate(
    cells: int,
    gpus: int,
    deadlines: Deadlines,
    history: Sequence[PastRun],
    sample: Sequence[Cell],
    packed: bool,
    load: LoadSettings | None,
    simulated: Scenario | None = None,
) -> Estimate:
    """The wall time of launching `cells` cells like `sample` on a host of `gpus` GPUs (`simulated`: its scenario)."""
    model = sample[0].flags.get("model-path") if sample else None
    widest = max((c.tp_size for c in sample), default=1)
    parallel = max(1, gpus // widest) if packed else 1
    durations = past_durations(history, model)
    if durations:
        return Estimate(cells, float(median(durations)), f"past runs ({len(durations)})", parallel)
    if simulated is not None:
        return Estimate(cells, simulated_launch_s(simulated, load), "the simulated host's timing", parallel)
    return Estimate(cells, worst_case_s(deadlines, load), "deadlines", parallel)
