"""SIGTERM (and Ctrl-C) during `orchestrator run` or `repro`: the server it launched is stopped, its GPUs freed.

Both launch a detached server (it must outlive a dropped SSH connection); without the engine's stop a
signal to the orchestrator would leave it holding the GPUs. The launch here hangs at model_load, so the
signal always lands while it is in flight.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fault_harness import FaultHost, cli_env, launch_in_flight, wait_for
from tests.paths import REPO

pytestmark = pytest.mark.slow

HANGING = ["--model-path", "/models/tiny", "--tp-size", "1", "--attention-backend", "torch_native"]


def _signalled(fh: FaultHost, args: list[str], sig: signal.Signals) -> tuple[int, str]:
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(),
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: launch_in_flight(fh.db) and bool(fh.gpu_holders()), 60, "the server holding a GPU"
        )
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_run_and_repro_stop_their_server_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    fh = FaultHost(tmp_path, deadlines={"model_load": "60s", "ready": "90s", "probe": "10s", "stop_grace": "2s"})
    try:
        rc, out = _signalled(fh, [*fh.args("run"), "--", *HANGING], sig)
        assert rc == 128 + sig.value, out
        assert "GPUs verified free" in out and "Traceback" not in out, out
        assert fh.leftovers() == [] and fh.gpu_holders() == [], out

        with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
            (run_id,) = conn.execute("SELECT run_id FROM runs ORDER BY started_at LIMIT 1").fetchone()
        rc, out = _signalled(fh, fh.args("repro", str(run_id), "--hosts", str(fh.hosts_file), "--host", fh.name), sig)
        assert rc == 128 + sig.value, out
        assert "GPUs verified free" in out and "Traceback" not in out, out
        assert fh.leftovers() == [] and fh.gpu_holders() == [], out
        with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
            states = {state for (state,) in conn.execute("SELECT state FROM runs")}
        assert states <= {"done", "abandoned"}, states  # no run left in flight: both were stopped on record
    finally:
        fh.reap()
