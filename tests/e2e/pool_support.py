"""A pool of two simulated hosts, `a` and `b`, for the end-to-end tests: its files, and its sweep through the CLI.

The fault harness's scenario decides each cell of the pool's matrix by its attention backend and KV-cache dtype,
on whichever host it runs (VERDICTS).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.fault_harness import FaultHost, cli_env
from tests.paths import REPO
from tests.sshd_host import SshdHost

MATRIX = """name: pool
flags: {model-path: /models/tiny, tp-size: 1}
matrix:
  attention-backend: [flashinfer, triton]
  kv-cache-dtype: [bf16, fp8_e4m3]
  mem-fraction-static: [0.8, 0.85]
probes: {settle_s: 0.2, concurrent_requests: 4}
load: off
"""
VERDICTS = {
    ("flashinfer", "bf16"): ("pass", "healthy"),
    ("flashinfer", "fp8_e4m3"): ("fail", "cuda_oom"),
    ("triton", "bf16"): ("fail", "nan_in_probs"),
    ("triton", "fp8_e4m3"): ("fail", "nan_in_probs"),
}
"""What the fault harness's scenario makes of each cell, whatever its mem-fraction-static."""


def pool_files(
    root: Path, sshds: Sequence[SshdHost | None] = (None, None), *, matrix: str | None = MATRIX, **host: Any
) -> tuple[Path, list[FaultHost]]:
    """Hosts a and b (each its own workdir and sim, over its sshd when given; `host` sets FaultHost's fields),
    root/hosts.yaml naming both and the group `pool`, and root/matrix.yaml (`matrix`; None: the caller writes it)."""
    members = [FaultHost(root / name, sshd=sshd, name=name, **host) for name, sshd in zip("ab", sshds, strict=True)]
    entries = {fh.name: json.loads(fh.hosts_file.read_text())[fh.name] for fh in members}
    hosts_file = root / "hosts.yaml"
    hosts_file.write_text(json.dumps({**entries, "pool": {"group": ["a", "b"]}}, indent=1))
    if matrix is not None:
        (root / "matrix.yaml").write_text(matrix)
    return hosts_file, members


def pool_sweep_argv(root: Path, hosts_file: Path, db: Path, *extra: str) -> list[str]:
    """`orchestrator sweep root/matrix.yaml --host pool` on these hosts and store, then `extra`."""
    return [sys.executable, "-m", "orchestrator", "sweep", str(root / "matrix.yaml"), "--host", "pool",
            "--hosts", str(hosts_file), "--db", str(db), *extra]  # fmt: skip


def run_pool_sweep(root: Path, hosts_file: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """The pool's sweep to its end, as a user runs it, its cells written to root/out.json (`--json-out`)."""
    return subprocess.run(
        pool_sweep_argv(root, hosts_file, db, "--json-out", str(root / "out.json")),
        cwd=REPO, capture_output=True, text=True, timeout=300, env=cli_env(),
    )  # fmt: skip


@contextlib.contextmanager
def pool_sweep_running(root: Path, hosts_file: Path, db: Path) -> Iterator[subprocess.Popen[str]]:
    """The pool's sweep in the background, in a session of its own (a signal reaches it alone), its output piped;
    killed when the block ends with it still running (a test that failed before it ended)."""
    proc = subprocess.Popen(
        pool_sweep_argv(root, hosts_file, db), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=cli_env(), start_new_session=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def verdict_of(label: str) -> tuple[str, str]:
    """The (status, category) the scenario gives the cell of this label (`attention-backend=..., ...`)."""
    flags = dict(part.split("=") for part in label.split(", "))
    return VERDICTS[(flags["attention-backend"], flags["kv-cache-dtype"])]
