"""The demo matrix on one simulated host, then on a pool of two, one after the other, timed end to end.

Each host is the simulated 8-GPU host of the demo (configs/sim/glm5-nvfp4-sm120.yaml) with its own workdir (so its
own simulated GPUs), reached over a loopback sshd of its own when OpenSSH is here. `pool_speedup_2hosts` is the
one-host sweep's wall time over the two-host sweep's, both as `orchestrator sweep` commands from start to exit.

Run alone: `.venv/bin/python scripts/bench_pool.py` (scripts/bench runs it too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_env import DEADLINES, REPO, BenchEnv

from orchestrator.store.sqlite import Store
from tests.sshd_host import SshdHost, login_user

DEMO_MATRIX = REPO / "configs" / "glm5-nvfp4-sm120.yaml"
DEMO_SCENARIO = REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml"


def _entry(env: BenchEnv, name: str, sshd: SshdHost | None, port_base: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "scenario": str(DEMO_SCENARIO), "gpus": 8, "workdir": str(env.root / "pool" / name),
        "deadlines": DEADLINES, "port_base": port_base,
    }  # fmt: skip
    if sshd is None:
        return entry | {"transport": "sim"}
    return entry | {
        "ssh": f"{sshd.user}@127.0.0.1:{sshd.port}", "identity_file": str(sshd.client_key),
        "known_hosts": str(sshd.known_hosts), "launcher": f"{sys.executable} -m orchestrator.sim",
    }  # fmt: skip


def _sweep(env: BenchEnv, name: str, hosts_file: Path, hosts: list[str]) -> tuple[float, dict[str, int]]:
    """One `orchestrator sweep` of the demo matrix; its wall time and runs per host (every cell must have a verdict)."""
    db = env.root / "pool" / f"{name}.db"
    # The demo without its speed load: one orchestrator runs one load at a time, so loads never overlap, on one
    # host or two; this figure is the launch path's, as the other sweep figures are (scripts/bench_load.py).
    matrix = env.root / "pool" / "demo-no-load.yaml"
    matrix.write_text(DEMO_MATRIX.read_text() + "\nload: off\n")
    args = [sys.executable, "-m", "orchestrator", "sweep", str(matrix), "--hosts", str(hosts_file)]
    args += ["--db", str(db)]
    for host in hosts:
        args += ["--host", host]
    started = time.time()
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=900, cwd=REPO,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    wall = time.time() - started
    if done.returncode != 0:
        raise RuntimeError(f"orchestrator sweep ({name}) failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        results = store.cell_results(sweep.sweep_id)
        runs = store.runs(sweep.sweep_id)
    if any(r.status is None for r in results):
        raise RuntimeError(f"orchestrator sweep ({name}) left cells without a verdict")
    per_host: dict[str, int] = {}
    for run in runs:
        per_host[run.host] = per_host.get(run.host, 0) + 1
    return wall, per_host


def measure(env: BenchEnv) -> dict[str, Any]:
    """One host, then a pool of two; the speedup and what each ran."""
    second = SshdHost(login_user()).start() if env.sshd is not None else None
    try:
        hosts_file = env.root / "pool" / "hosts.yaml"
        hosts_file.parent.mkdir(parents=True, exist_ok=True)
        entries = {
            "a": _entry(env, "a", env.sshd, env.port_base + 3000),
            "b": _entry(env, "b", second, env.port_base + 6000),
        }
        hosts_file.write_text(json.dumps(entries, indent=1))
        one_s, one_runs = _sweep(env, "one", hosts_file, ["a"])
        two_s, two_runs = _sweep(env, "two", hosts_file, ["a", "b"])
    finally:
        if second is not None:
            second.cleanup()
    return {
        "one_host_s": one_s, "one_host_runs": one_runs, "two_hosts_s": two_s, "two_hosts_runs": two_runs,
        "pool_speedup_2hosts": one_s / two_s,
    }  # fmt: skip


def report(figures: dict[str, Any]) -> None:
    """The figure with its goal, and what it was measured on."""
    print(
        f"pool: the demo matrix took {figures['one_host_s']:.1f}s on one host (runs {figures['one_host_runs']}) and "
        f"{figures['two_hosts_s']:.1f}s on a pool of two (runs {figures['two_hosts_runs']})",
        file=sys.stderr,
    )
    speedup = figures["pool_speedup_2hosts"]
    print(f"pool_speedup_2hosts: {speedup:.3f}   (goal >= 1.8: {'met' if speedup >= 1.8 else 'MISSED'})")


def main() -> int:
    """Measure the pool alone."""
    env = BenchEnv.start(want_ssh="--local" not in sys.argv)
    try:
        report(measure(env))
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
