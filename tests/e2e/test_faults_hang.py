"""Servers that hang: in every startup phase, in every probe, and in shutdown.

One packed sweep on a 4-GPU simulated host, one cell per way of hanging (the scenario picks the hang by the
cell's --served-model-name). Each hung launch must be cut at its deadline with that phase recorded, its
process group gone and its GPUs free (the fake nvidia-smi says so) before any later cell gets them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.model import Category, Cell, Phase, Status
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.engine import SweepHooks
from tests.faults_support import (
    alive,
    gpu_holders,
    group_members,
    reap,
    run_sweep,
    sim_processes,
    write_hosts,
    write_matrix,
    write_scenario,
)

HANGS = {
    "hang-import": Phase.IMPORT,
    "hang-model-load": Phase.MODEL_LOAD,
    "hang-memory-alloc": Phase.MEMORY_ALLOC,
    "hang-cuda-graph-capture": Phase.CUDA_GRAPH_CAPTURE,
    "hang-warmup": Phase.WARMUP,
    "hang-greedy": Phase.GREEDY_DECODE,
    "hang-sampled": Phase.SAMPLED_DECODE,
    "hang-concurrent": Phase.CONCURRENT_DECODE,
}
SHUTDOWN = "hang-shutdown"
# Which deadline cuts each hang (seconds, tests/faults_support.FAST): import and warm-up have none of their
# own, so `ready` (from the launch) bounds them; a probe's is per request.
LIMIT_S = {
    Phase.IMPORT: 3.0,
    Phase.MODEL_LOAD: 1.5,
    Phase.MEMORY_ALLOC: 1.5,
    Phase.CUDA_GRAPH_CAPTURE: 1.5,
    Phase.WARMUP: 3.0,
    Phase.GREEDY_DECODE: 2.0,
    Phase.SAMPLED_DECODE: 2.0,
    Phase.CONCURRENT_DECODE: 2.0,
}
STOP_GRACE_S = 1.0
SLACK_S = 6.0
"""What a loaded CI machine may add to a deadline: launch, polls, stop, GPU release check."""


@dataclass
class Observed:
    """What the hooks saw while the sweep ran, and what it stored."""

    runs: dict[str, RunRecord] = field(default_factory=dict)
    """served-model-name -> its run."""
    held_after: dict[str, list[int]] = field(default_factory=dict)
    """served-model-name -> GPUs of its slot still held when its result came in (must be empty)."""
    released: dict[str, bool] = field(default_factory=dict)
    shutdown_ranks: list[int] = field(default_factory=list)
    """The pids holding the shutdown-hang cell's GPU while it served."""
    workdir: Path = Path()


@pytest.fixture(scope="module")
def hung(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    """Run the sweep once for the whole module."""
    root = tmp_path_factory.mktemp("hang")
    rules = [
        {"when": {"served-model-name": name}, "fail": {"at": phase.value, "kind": "hang"}}
        for name, phase in HANGS.items()
    ]
    rules.append({"when": {"served-model-name": SHUTDOWN}, "fail": {"at": "shutdown", "kind": "hang"}})
    scenario = write_scenario(root / "scenario.yaml", rules, gpus=4)
    seen = Observed(workdir=root / "work")
    hosts = write_hosts(root / "hosts.yaml", seen.workdir, scenario, gpus=4)
    names = ["ok", *HANGS, SHUTDOWN]
    matrix = write_matrix(
        root / "matrix.yaml",
        name="hangs",
        flags={"model-path": "/models/m", "tp-size": 1},
        probes={"settle_s": 0.1},
        matrix={"served-model-name": names},
    )

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if event == "ready" and cell.flags["served-model-name"] == SHUTDOWN:
            (pids,) = sim_processes(seen.workdir, SHUTDOWN).values()
            seen.shutdown_ranks.extend(h.pid for h in gpu_holders(seen.workdir) if h.pid in pids[1:])

    def on_result(result: AttemptResult) -> None:
        # Runs before the scheduler hands these GPUs to another cell.
        name = str(result.cell.flags["served-model-name"])
        seen.held_after[name] = [h.gpu for h in gpu_holders(seen.workdir) if h.gpu in result.slot.gpus]
        seen.released[name] = result.gpus_released

    db = root / "store.db"
    try:
        sweep_id = run_sweep(matrix, hosts, db, hooks=SweepHooks(on_event=on_event, on_result=on_result))
    finally:
        left = reap(seen.workdir)
    assert not left, f"launch groups left running after the sweep: {left}"
    with Store(db) as store:
        cells = {c.cell_id: c for c in store.get_cells(sweep_id)}
        seen.runs = {str(cells[r.cell_id].flags["served-model-name"]): r for r in store.runs(sweep_id)}
    assert sorted(seen.runs) == sorted(names)
    yield seen


@pytest.mark.parametrize("name", list(HANGS))
def test_a_hang_is_cut_at_its_deadline_with_its_phase(hung: Observed, name: str) -> None:
    run = hung.runs[name]
    phase = HANGS[name]
    assert run.verdict is not None
    assert (run.verdict.status, run.verdict.category, run.verdict.phase) == (
        Status.FAIL,
        Category.HANG_OR_TIMEOUT,
        phase,
    ), run.verdict
    assert run.ended_at is not None
    took = run.ended_at - run.started_at
    assert run.outcome is not None
    root = run.verdict.root_cause_line or ""
    if run.outcome.deadline_phase is None and "couldn't get a response" in root:
        # The server reported its own hang (SGLang's health check: "Server couldn't get a response from
        # detokenizer"): the wait stops on that fatal line instead of waiting out the deadline.
        assert took <= LIMIT_S[phase] + SLACK_S, f"{name} took {took:.1f}s"
        return
    assert LIMIT_S[phase] <= took <= LIMIT_S[phase] + SLACK_S, f"{name} took {took:.1f}s"
    if phase.order <= Phase.WARMUP.order:
        assert run.outcome.deadline_phase is phase and not run.outcome.reached_ready
    else:
        failed = run.outcome.failed_probe
        assert failed is not None and failed.timed_out, run.outcome


@pytest.mark.parametrize("name", [*HANGS, SHUTDOWN])
def test_the_hung_launch_is_gone_and_its_gpus_free_before_the_next_cell(hung: Observed, name: str) -> None:
    run = hung.runs[name]
    assert hung.released[name], f"{name}: GPUs not released"
    assert hung.held_after[name] == [], f"{name}: nvidia-smi still shows GPUs {hung.held_after[name]} held"
    assert run.pgid is not None and group_members(run.pgid) == []


def test_every_gpu_was_used_again_after_a_hang(hung: Observed) -> None:
    used = [gpu for run in hung.runs.values() for gpu in run.gpus]
    # 10 one-GPU cells on 4 GPUs: each GPU served several launches, hung ones included.
    assert sorted(set(used)) == [0, 1, 2, 3] and len(used) == 10


def test_ranks_that_survive_sigterm_are_killed_after_the_grace(hung: Observed) -> None:
    run = hung.runs[SHUTDOWN]
    assert run.verdict is not None and run.verdict.status is Status.PASS, run.verdict
    assert run.timings.get("sigkill_after_s") == STOP_GRACE_S, run.timings
    assert hung.shutdown_ranks, "no rank was seen holding the GPU while the server served"
    assert not [pid for pid in hung.shutdown_ranks if alive(pid)]
    assert gpu_holders(hung.workdir) == []


def test_a_clean_shutdown_needs_no_sigkill(hung: Observed) -> None:
    run = hung.runs["ok"]
    assert run.verdict is not None and run.verdict.status is Status.PASS
    assert "sigkill_after_s" not in run.timings
