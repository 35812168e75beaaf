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


def _one_id_store(tmp_path: Path) -> tuple[Path, list[str]]:
    """Three sweeps of one matrix on one host (the last regressed), one on another host, and a one-cell run."""
    from orchestrator.model import Status
    from orchestrator.store.records import COMMAND_LINE
    from tests.store.test_latest import add_sweep
    from tests.store.test_records import make_cell, make_sweep

    db = tmp_path / "o.db"
    ids = ["s-20261201-010000-0001", "s-20261202-010000-0002", "s-20261203-010000-0003"]
    cells = [make_cell("triton"), make_cell("cutlass")]
    with Store(db) as store:
        for n, (sweep_id, last) in enumerate(zip(ids, (Status.PASS, Status.PASS, Status.FAIL), strict=True)):
            add_sweep(store, make_sweep(sweep_id, 1_800_000_000.0 + n * 86400), cells, [Status.PASS, last], True)
        other = make_sweep("s-20261204-010000-0004", 1_800_400_000.0, host="box2")
        add_sweep(store, other, cells, [Status.FAIL, Status.FAIL], True)
        one = make_sweep("s-20261204-020000-0005", 1_800_410_000.0, name="run", matrix_path=COMMAND_LINE)
        add_sweep(store, one, cells[:1], [Status.FAIL], True)
    return db, ids


def test_compare_with_one_id_takes_the_latest_sweep_of_its_matrix_on_its_host(tmp_path: Path) -> None:
    db, (first, second, third) = _one_id_store(tmp_path)
    result = CliRunner().invoke(app, ["compare", first, "--db", str(db), "-f", "json", "--fail-on-regression"])
    # The regression is the third sweep's (the other host's and the one-cell run's are no such sweep).
    assert result.exit_code == 1, result.output
    assert f"comparing {first} with {third}, the latest sweep of matrix 'glm5-nvfp4-sm120' on host sim" in result.stderr
    data = json.loads(result.stdout)
    assert [c["flags"]["attention-backend"] for c in data["regressions"]] == ["cutlass"]
    assert CliRunner().invoke(app, ["compare", second, "--db", str(db), "--fail-on-regression"]).exit_code == 1
    # Both ids given: as before, and no line about which was taken.
    both = CliRunner().invoke(app, ["compare", first, second, "--db", str(db), "--fail-on-regression"])
    assert both.exit_code == 0 and "comparing" not in both.stderr, both.output


def test_compare_with_one_id_refuses_what_it_cannot_pair(tmp_path: Path) -> None:
    db, (first, _, third) = _one_id_store(tmp_path)
    latest = CliRunner().invoke(app, ["compare", third, "--db", str(db), "--fail-on-regression"])
    assert latest.exit_code == 1 and "no change" not in latest.output
    assert f"error: {db}: sweep {third} is the latest sweep of matrix 'glm5-nvfp4-sm120' on host sim" in latest.stderr
    assert f"fix: `orchestrator compare s-20261202-010000-0002 {third}`" in latest.stderr
    alone = CliRunner().invoke(app, ["compare", "s-20261204-010000-0004", "--db", str(db)])
    assert alone.exit_code == 1 and "is the only sweep of matrix 'glm5-nvfp4-sm120' on host box2" in alone.stderr
    assert "orchestrator compare OLD NEW" in alone.stderr and "orchestrator sweeps" in alone.stderr
    # Named twice on purpose: compared, with a word that this can show no change.
    itself = CliRunner().invoke(app, ["compare", first, first[:12], "--db", str(db), "--fail-on-regression"])
    assert itself.exit_code == 0 and f"note: both ids name sweep {first}" in itself.stderr
