"""A host whose failures do not follow the flags is suspect: its cells go to the other hosts of the pool.

Two simulated hosts run the same SGLang on the same GPU model (one lane), but host b's GPUs are failing: every
launch there dies with CUDA's uncorrectable-ECC error. After its first such failure host b takes no new cell,
the failed cell is tried again on host a (a hardware fault is the host's, not the flags'), the sweep says why
once, and every cell ends with host a's verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.fault_harness import FaultHost, cli_env
from tests.paths import REPO

pytestmark = pytest.mark.slow

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_host_with_failing_gpus_is_suspect_and_its_cells_run_elsewhere(tmp_path: Path) -> None:
    import subprocess
    import sys

    members = [FaultHost(tmp_path / name, gpus=1, name=name, load_s=0.3) for name in "ab"]
    bad = yaml.safe_load(members[1].scenario.read_text())
    bad["rules"].append({"when": {}, "fail": {"at": "model_load", "kind": "illegal_memory_access", "message": ECC}})
    members[1].scenario.write_text(yaml.safe_dump(bad))
    entries = {fh.name: json.loads(fh.hosts_file.read_text())[fh.name] for fh in members}
    hosts_file = tmp_path / "hosts.yaml"
    hosts_file.write_text(json.dumps({**entries, "pool": {"group": ["a", "b"]}}, indent=1))
    matrix = members[0].matrix_file.read_text().replace("probes:", "retries: 1\nprobes:")
    (tmp_path / "matrix.yaml").write_text(matrix)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / "matrix.yaml"), "--host", "pool",
             "--hosts", str(hosts_file), "--db", str(tmp_path / "store.db"), "--json-out", str(tmp_path / "out.json")],
            cwd=REPO, capture_output=True, text=True, timeout=300, env=cli_env(),
        )  # fmt: skip
    finally:
        for fh in members:
            fh.reap()
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if "host b is suspect" in line]
    assert len(said) == 1 and "uncorrectable ECC" in said[0] and "its cells go to a" in said[0], done.stdout
    cells = json.loads((tmp_path / "out.json").read_text())["cells"]
    expected = {
        ("flashinfer", "bf16"): ("pass", "healthy"),
        ("flashinfer", "fp8_e4m3"): ("fail", "cuda_oom"),
        ("triton", "bf16"): ("fail", "nan_in_probs"),
        ("triton", "fp8_e4m3"): ("fail", "nan_in_probs"),
    }
    for cell in cells:
        key = (cell["flags"]["attention-backend"], cell["flags"]["kv-cache-dtype"])
        assert (cell["status"], cell["category"]) == expected[key], cell
        assert cell["host"] == "a", cell  # the verdict shown is host a's
    launched_on_b = [d for d in (tmp_path / "b" / "host" / "runs").glob("r-*")]
    assert len(launched_on_b) <= 1, "host b took no new cell after its first hardware fault"
