"""A pool sweep plans like a single host: adaptive by default above 64 cells, the cost question, the budget.

Before the engine was one, a pool ran every cell of the matrix whatever `--strategy` or `--budget` said,
asked nothing, and still wrote the requested strategy into `--json-out`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fault_harness import FaultHost, cli_env
from tests.paths import REPO

MATRIX = """name: pool-648
flags: {model-path: /models/tiny, tp-size: 1}
matrix:
  attention-backend: [flashinfer, triton]
  kv-cache-dtype: [bf16, fp8_e4m3]
  mem-fraction-static: [0.8, 0.85]
  chunked-prefill-size: [1024, 2048, 4096]
  max-running-requests: [8, 16, 32]
  schedule-policy: [lpm, fcfs, random]
  cuda-graph-max-bs: [8, 16, 32]
probes: {settle_s: 0.1, concurrent_requests: 2}
"""
CELLS = 2 * 2 * 2 * 3 * 3 * 3 * 3


def _pool(root: Path) -> Path:
    members = [FaultHost(root / name, gpus=2, name=name, load_s=0.02) for name in "ab"]
    entries = {fh.name: json.loads(fh.hosts_file.read_text())[fh.name] for fh in members}
    hosts_file = root / "hosts.yaml"
    hosts_file.write_text(json.dumps({**entries, "pool": {"group": ["a", "b"]}}, indent=1))
    (root / "matrix.yaml").write_text(MATRIX)
    return hosts_file


def _sweep(root: Path, hosts_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(root / "matrix.yaml"), "--host", "pool",
         "--hosts", str(hosts_file), "--db", str(root / "orchestrator.db"), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=cli_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_pool_of_a_648_cell_matrix_is_adaptive_by_default_and_asks_before_a_long_night(tmp_path: Path) -> None:
    hosts_file = _pool(tmp_path)
    # No terminal to ask, and a limit of zero hours: the question is asked, and refused, before any launch.
    refused = _sweep(tmp_path, hosts_file, "--max-hours", "0")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{CELLS} cells; strategy adaptive" in refused.stdout, refused.stdout
    assert "there is no terminal to ask" in refused.stderr and "Nothing was launched" in refused.stderr
    for name in "ab":
        assert not list((tmp_path / name / "host").glob("runs/r-*")), "nothing was launched on either host"

    out = tmp_path / "out.json"
    done = _sweep(tmp_path, hosts_file, "--yes", "--budget", "14", "--json-out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["strategy"] == "adaptive" and data["matrix_cells"] == CELLS
    ran = data["cells"]
    assert len(ran) <= 14 < CELLS and data["not_run"] == CELLS - len(ran), (len(ran), data["not_run"])
    assert {c["host"] for c in ran} == {"a", "b"}, "the cells were spread over the pool"
