"""`--resume` without the API key's variable touches no run; with it, the sweep ends as if never interrupted.

The sweep's servers demand `--api-key` (the simulated host answers 401 without it, as SGLang's middleware
does). The orchestrator is killed with launches in flight; a resume with the variable unset must refuse
before re-attaching to them (a re-attached server probed without the key would be stored as a failure),
and a resume with the variable set must finish with the verdicts of an uninterrupted sweep.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fault_harness import EXPECTED, FaultHost, cli_env, launch_in_flight, wait_for
from tests.paths import REPO

pytestmark = pytest.mark.slow

KEY = "sk-RESUMEKEY-7Hq2vLmN4"
MATRIX = """name: resume-secrets
flags: {model-path: /models/tiny, tp-size: 1, api-key: {secret: ORCH_API_KEY}}
matrix:
  attention-backend: [flashinfer, triton]
  kv-cache-dtype: [bf16, fp8_e4m3]
probes: {settle_s: 0.2, concurrent_requests: 4}
"""


def _runs(db: Path) -> list[tuple[str, str, str | None]]:
    """(run id, state, verdict JSON) of every run in the store."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return list(conn.execute("SELECT run_id, state, verdict FROM runs ORDER BY run_id"))


def test_a_resume_without_the_key_refuses_before_touching_a_run(tmp_path: Path) -> None:
    fh = FaultHost(tmp_path, load_s=1.5)
    fh.matrix_file.write_text(MATRIX)
    with_key = cli_env() | {"ORCH_API_KEY": KEY}
    without = {k: v for k, v in cli_env().items() if k != "ORCH_API_KEY"}
    try:
        first = subprocess.Popen(
            fh.args("sweep"), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=with_key,
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: launch_in_flight(fh.db), 120, "a launch in flight")
        os.kill(first.pid, signal.SIGKILL)  # the orchestrator alone: its servers live on, to be re-attached
        first.wait(10)
        before = _runs(fh.db)
        assert any(state == "launched" for _, state, _ in before), before

        refused = subprocess.run(
            [*fh.args("sweep"), "--resume", _sweep_id(fh.db)], cwd=REPO, capture_output=True,
            text=True, timeout=120, env=without,
        )  # fmt: skip
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "ORCH_API_KEY" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
        assert _runs(fh.db) == before, "the refused resume stored nothing: no verdict, no run abandoned"
        assert fh.gpu_holders(), "the servers in flight were left alone, for the resume that has the key"

        done = subprocess.run(
            [*fh.args("sweep"), "--resume", _sweep_id(fh.db)], cwd=REPO, capture_output=True, text=True,
            timeout=300, env=with_key,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert fh.table() == EXPECTED
        assert KEY not in fh.db.read_bytes().decode("latin-1")
        assert fh.leftovers() == [] and fh.gpu_holders() == []
    finally:
        fh.reap()


def _sweep_id(db: Path) -> str:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (sweep_id,) = conn.execute("SELECT sweep_id FROM sweeps ORDER BY started_at DESC LIMIT 1").fetchone()
    return str(sweep_id)
