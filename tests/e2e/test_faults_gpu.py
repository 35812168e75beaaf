"""GPUs held by somebody else's process: noticed before any launch, never killed unless the host allows it.

The holders are real processes (`python -m orchestrator.sim.hold_gpu`, or one that ignores SIGTERM) that the
simulated host's nvidia-smi reports, exactly as it reports the orchestrator's own launches.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from orchestrator.model import Category, Status
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.engine import SweepHooks
from orchestrator.sweep.scheduler import VERIFIED_FRESH_S
from tests.faults_support import (
    Holder,
    cli,
    gpu_holders,
    holders,
    reap,
    run_sweep,
    store_rows,
    write_hosts,
    write_matrix,
    write_scenario,
)


def _setup(tmp_path: Path, *, kill: bool = False) -> tuple[Path, Path, Path]:
    """(workdir, hosts file, db) of a simulated 4-GPU host."""
    scenario = write_scenario(tmp_path / "scenario.yaml", [], gpus=4)
    workdir = tmp_path / "work"
    hosts = write_hosts(tmp_path / "hosts.yaml", workdir, scenario, gpus=4, kill_foreign_gpu_holders=kill)
    return workdir, hosts, tmp_path / "store.db"


def _two_cells(tmp_path: Path, tp: int = 2) -> Path:
    return write_matrix(
        tmp_path / "matrix.yaml",
        name="gpus",
        flags={"model-path": "/models/m", "tp-size": tp},
        probes={"settle_s": 0.1},
        matrix={"served-model-name": ["a", "b"]},
    )


def test_preflight_refuses_held_gpus_names_the_holders_and_kills_nothing(tmp_path: Path) -> None:
    workdir, hosts, db = _setup(tmp_path)
    matrix = _two_cells(tmp_path)
    with holders() as started:
        started.append(Holder(workdir, "0,1"))
        holder = started[0]
        result = cli("sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), db=db)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"GPU 0: pid {holder.pid}" in result.stderr and f"GPU 1: pid {holder.pid}" in result.stderr
        assert "nothing was killed" in result.stderr
        assert holder.alive() and {h.pid for h in gpu_holders(workdir)} == {holder.pid}
    assert not (workdir / "runs").exists(), "a run directory was created: something was launched"
    assert store_rows(db) == 0


def test_a_holder_that_arrives_mid_sweep_blocks_only_the_cells_that_need_its_gpus(tmp_path: Path) -> None:
    workdir, hosts, db = _setup(tmp_path)
    # In order: runs first on GPUs 0-1; then the holder takes 0-1; a 2-GPU cell still fits on 2-3, a
    # 4-GPU cell cannot run at all, and the 2-GPU cell after it runs on 2-3 too.
    cells = [("first", 2), ("fits", 2), ("needs-all", 4), ("after", 2)]
    matrix = write_matrix(
        tmp_path / "matrix.yaml",
        name="mid-sweep",
        flags={"model-path": "/models/m"},
        probes={"settle_s": 0.1},
        matrix={"include": [{"served-model-name": name, "tp-size": tp} for name, tp in cells]},
    )
    with holders() as started:

        def on_result(result: AttemptResult) -> None:
            if not started:
                started.append(Holder(workdir, "0,1"))
                # GPUs nvidia-smi showed free this recently are reused unasked: arrive after that window.
                time.sleep(VERIFIED_FRESH_S)

        try:
            sweep_id = run_sweep(matrix, hosts, db, packed=False, hooks=SweepHooks(on_result=on_result))
        finally:
            assert reap(workdir) == []
        holder = started[0]
        assert holder.alive(), "the foreign holder was killed"
        assert {(h.pid, h.gpu) for h in gpu_holders(workdir)} == {(holder.pid, 0), (holder.pid, 1)}
    with Store(db) as store:
        names = {c.cell_id: c.flags["served-model-name"] for c in store.get_cells(sweep_id)}
        runs = {names[r.cell_id]: r for r in store.runs(sweep_id)}
    assert {n: r.verdict.status for n, r in runs.items() if r.verdict} == {
        "first": Status.PASS,
        "fits": Status.PASS,
        "needs-all": Status.INFRA,
        "after": Status.PASS,
    }
    assert runs["first"].gpus == (0, 1) and runs["fits"].gpus == (2, 3) and runs["after"].gpus == (2, 3)
    refused = runs["needs-all"]
    assert refused.verdict is not None and refused.verdict.category is Category.GPU_MEMORY_IN_USE
    assert f"pid {holder.pid}" in refused.verdict.reason and "not launched" in refused.verdict.reason
    assert refused.run_dir is None and refused.pgid is None, "the refused cell was launched"


def test_with_kill_foreign_gpu_holders_they_are_ended_by_pid_and_the_sweep_runs(tmp_path: Path) -> None:
    workdir, hosts, db = _setup(tmp_path, kill=True)
    matrix = _two_cells(tmp_path)
    with holders() as started:
        started.append(Holder(workdir, "0"))
        started.append(Holder(workdir, "1", ignore_term=True))
        polite, stubborn = started
        before = time.monotonic()
        result = cli("sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), db=db)
        assert result.returncode == 0, result.stdout + result.stderr
        assert polite.proc.wait(5) == 0, "hold_gpu lets go on SIGTERM and exits 0"
        assert stubborn.proc.wait(5) == -9, "a holder that ignores SIGTERM is SIGKILLed after the grace"
    assert time.monotonic() - before < 60
    assert reap(workdir) == []
    assert gpu_holders(workdir) == []
    table = json.loads(cli("table", "--format", "json", db=db).stdout)
    assert {c["status"] for c in table["cells"]} == {"pass"}
    with Store(db) as store:
        facts = store.latest_sweep().host_facts  # type: ignore[union-attr]
    assert f"pid {polite.pid}" in facts["foreign_gpu_holders_killed"]
    assert f"pid {stubborn.pid}" in facts["foreign_gpu_holders_killed"]


def test_kill_foreign_gpu_holders_spares_the_launches_of_another_live_sweep(tmp_path: Path) -> None:
    workdir, hosts, db = _setup(tmp_path, kill=True)
    matrix = _two_cells(tmp_path)
    with holders() as started:
        started.append(Holder(workdir, "0,1"))
        holder = started[0]
        # Another orchestrator on this machine holds the host: the holder may well be one of its servers.
        owner = {"hostname": socket.gethostname(), "pid": holder.pid, "sweep_id": "s-other", "heartbeat": time.time()}
        (workdir / "lock").mkdir(parents=True)
        (workdir / "lock" / "owner.json").write_text(json.dumps(owner))
        result = cli("sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), db=db)
        assert result.returncode == 1, result.stdout + result.stderr
        # The lock is taken before preflight looks at the GPUs, so the kill option never reaches them.
        assert "locked by sweep s-other" in result.stderr
        assert holder.alive()
    assert not (workdir / "runs").exists()
    assert store_rows(db) == 0
