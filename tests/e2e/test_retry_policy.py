"""Retry what can change, never what cannot: the demo matrix with `retries: 2`, on the demo's scenario plus a
transient failure (a server killed from outside while it loads).

No deterministic failure (the demo's unsupported_config cells) is launched twice; every transient one is launched
again, each time once the GPUs of the attempt before were released; the sweep prints the launches it saved; the
table's JSON says why each cell was or was not retried.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from tests.fault_harness import cli_env, our_processes
from tests.paths import REPO

pytestmark = pytest.mark.slow

KILLED = {"when": {"attention-backend": "flashinfer", "kv-cache-dtype": "bf16", "fp8-gemm-backend": "cutlass"},
          "fail": {"at": "model_load", "kind": "process_killed"}}  # fmt: skip


def test_deterministic_failures_are_launched_once_and_transient_ones_again(tmp_path: Path) -> None:
    scenario = yaml.safe_load((REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml").read_text())
    scenario["rules"].append(KILLED)
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    matrix = yaml.safe_load((REPO / "configs" / "glm5-nvfp4-sm120.yaml").read_text())
    matrix |= {"retries": 2, "retry": {"flaky": 0}, "deadlines": {"model_load": "30s", "ready": "60s"}}
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(matrix))
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({"sim": {"transport": "sim", "gpus": 8, "workdir": str(tmp_path / "host"),
                                             "scenario": str(tmp_path / "scenario.yaml")}}))  # fmt: skip
    db = tmp_path / "store.db"
    out = tmp_path / "out.json"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / "matrix.yaml"), "--hosts", str(hosts),
             "--db", str(db), "--json-out", str(out), "--yes"],
            cwd=REPO, capture_output=True, text=True, timeout=600, env=cli_env(),
        )  # fmt: skip
    finally:
        assert our_processes(tmp_path) == []
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cells = {c["cell_id"]: c for c in json.loads(out.read_text())["cells"]}
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        runs = [r for r in store.runs(sweep.sweep_id) if r.run_dir]  # launched ones
    launches: dict[str, list[RunRecord]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.started_at):
        launches[run.cell_id].append(run)
    deterministic = [c for c in cells.values() if c["category"] == "unsupported_config"]
    transient = [c for c in cells.values() if c["category"] == "process_killed"]
    assert deterministic and transient, sorted({c["category"] for c in cells.values()})
    for cell in deterministic:
        assert len(launches[cell["cell_id"]]) == 1, cell["label"]
        assert cell["retry_reason"].startswith("not retried: unsupported_config is deterministic"), cell
    for cell in transient:
        tries = launches[cell["cell_id"]]
        assert len(tries) == 3, (cell["label"], len(tries))  # 1 + retries: 2
        for before, after in itertools.pairwise(tries):
            # Launched again only once the attempt before had ended: its stop and GPU-free check are part of it.
            assert before.ended_at is not None and after.started_at >= before.ended_at
        assert "transient" in cell["retry_reason"], cell
    saved = 2 * len(deterministic)
    assert f"retry policy: {saved} launch(es) saved" in done.stdout, done.stdout[-2000:]
