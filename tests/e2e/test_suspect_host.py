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

from tests.e2e.pool_support import pool_files, run_pool_sweep, verdict_of

pytestmark = pytest.mark.slow

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_host_with_failing_gpus_is_suspect_and_its_cells_run_elsewhere(tmp_path: Path) -> None:
    hosts_file, members = pool_files(tmp_path, gpus=1, load_s=0.3, matrix=None)
    bad = yaml.safe_load(members[1].scenario.read_text())
    bad["rules"].append({"when": {}, "fail": {"at": "model_load", "kind": "illegal_memory_access", "message": ECC}})
    members[1].scenario.write_text(yaml.safe_dump(bad))
    matrix = members[0].matrix_file.read_text().replace("probes:", "retries: 1\nprobes:")
    (tmp_path / "matrix.yaml").write_text(matrix)
    try:
        done = run_pool_sweep(tmp_path, hosts_file, tmp_path / "store.db")
    finally:
        for fh in members:
            fh.reap()
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if "host b is suspect" in line]
    assert len(said) == 1 and "uncorrectable ECC" in said[0] and "its cells go to a" in said[0], done.stdout
    cells = json.loads((tmp_path / "out.json").read_text())["cells"]
    for cell in cells:
        assert (cell["status"], cell["category"]) == verdict_of(cell["label"]), cell
        assert cell["host"] == "a", cell  # the verdict shown is host a's
    launched_on_b = [d for d in (tmp_path / "b" / "host" / "runs").glob("r-*")]
    assert len(launched_on_b) <= 1, "host b took no new cell after its first hardware fault"
