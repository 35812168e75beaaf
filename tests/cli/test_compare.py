"""Acceptance: a sweep at SGLang 0.5.9 (nsa flag names) against one at 0.5.23 (dsa names) with one regression.

Both sweeps run the same matrix, written with 0.5.9's `--nsa-decode-backend`, on the simulated host; the
orchestrator spells it `--dsa-decode-backend` for 0.5.23 (which rejects the old name), and compare must
match every cell across the rename and report exactly the one cell the 0.5.23 scenario breaks.
The helpers here are shared by the repro and installs tests.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from orchestrator.cli import app
from orchestrator.store import Store
from tests.paths import REPO
from tests.simhost import random_port_base

DATA = REPO / "tests" / "data"
SIM_059 = DATA / "sim-0.5.9.yaml"
SIM_0523 = DATA / "sim-0.5.23-regressed.yaml"
FAST_DEADLINES = (
    "{model_load: 20s, memory_alloc: 10s, cuda_graph_capture: 10s, ready: 40s, probe: 20s, stop_grace: 2s, "
    "gpu_release: 10s}"
)
"""Seconds where a real host needs minutes, with room for a loaded test machine (nothing here hangs)."""
MATRIX = """\
name: {name}
host: {host}
flags: {{model-path: /models/GLM-5-NVFP4, tp-size: 1, trust-remote-code: true, kv-cache-dtype: bf16,
        fp8-gemm-backend: cutlass}}
matrix:
  attention-backend: [nsa, flashinfer]
  nsa-decode-backend: [flashmla_kv, flashmla_sparse]
probes: {{settle_s: 0.2, concurrent_requests: 4}}
"""
"""Four cells; the 0.5.23 scenario breaks flashinfer + flashmla_kv at the first greedy request."""


def sim_host(name: str, workdir: Path, body: str = "") -> str:
    """A simulated host entry of a hosts file: short deadlines, its own working directory and ports."""
    # A random base: two test sessions on one machine must not race for the same ports.
    port_base = random_port_base()
    return (
        f"{name}:\n  transport: sim\n  gpus: 4\n  workdir: {workdir}\n  port_base: {port_base}\n"
        f"  python: {sys.executable}\n  deadlines: {FAST_DEADLINES}\n{body}"
    )


def invoke(args: list[str]) -> Result:
    """Run the CLI in-process."""
    return CliRunner().invoke(app, args)


def sweep(db: Path, hosts: Path, matrix: Path, *extra: str) -> str:
    """Run a sweep through the CLI; returns its id (the newest sweep in the store)."""
    result = invoke(["sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), *extra])
    assert result.exit_code == 0, result.output
    with Store(db, create=False) as store:
        latest = store.latest_sweep()
    assert latest is not None
    return latest.sweep_id


def compare_json(db: Path, *args: str) -> dict[str, Any]:
    """`orchestrator compare ... --format json`, parsed."""
    result = invoke(["compare", *args, "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_a_cross_version_compare_reports_exactly_the_regression_and_the_version(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        sim_host("old", tmp_path / "old", f"  scenario: {SIM_059}\n")
        + sim_host("new", tmp_path / "new", f"  scenario: {SIM_0523}\n")
    )
    db = tmp_path / "o.db"
    for name in ("old", "new"):
        (tmp_path / f"{name}.yaml").write_text(MATRIX.format(name=f"versions-{name}", host=name))
    before = sweep(db, hosts, tmp_path / "old.yaml")
    after = sweep(db, hosts, tmp_path / "new.yaml")

    data = compare_json(db, before, after)

    assert [c["flags"]["attention-backend"] for c in data["regressions"]] == ["flashinfer"]
    regression = data["regressions"][0]
    assert regression["flags"]["dsa-decode-backend"] == "flashmla_kv"
    assert regression["before"]["status"] == "pass"
    assert (regression["after"]["status"], regression["after"]["category"]) == ("fail", "illegal_memory_access")
    assert data["env_diff"]["sglang"] == ["0.5.9", "0.5.23"]
    assert data["added"] == data["removed"] == data["fixes"] == data["changed"] == []
    assert data["matched"] == 4
    with Store(db, create=False) as store:
        commands = [r.command for r in store.runs(after)]
    assert all("--dsa-decode-backend" in c and "--nsa-decode-backend" not in c for c in commands)
