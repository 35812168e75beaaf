"""Ctrl-C (SIGINT) and SIGTERM of a sweep mid-way: the id and the exact resume command, nothing left running.

The sweep is the kill matrix of test_faults_resume.py (whose baseline shows that it equals an
uninterrupted sweep); the signal lands while launches are in flight. After the orchestrator exits,
no process of the test's is alive and the sim's nvidia-smi shows no GPU held; running the printed
resume command, as printed, finishes the sweep with the uninterrupted table.
"""

from __future__ import annotations

import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fault_harness import FaultHost, cli_env, wait_for
from tests.fault_kill import expected_table, kill_host, sweep_record
from tests.paths import REPO

pytestmark = pytest.mark.slow


def _launched(fh: FaultHost) -> bool:
    found = sweep_record(fh.db)
    return found is not None and found[1].get("launched", 0) >= 1


def _interrupt(fh: FaultHost, sig: signal.Signals) -> tuple[int, str]:
    proc = fh.spawn("sweep")
    try:
        wait_for(lambda: _launched(fh), 120, "a launch in flight")
        time.sleep(0.3)  # into its model load or probes
        proc.send_signal(sig)  # the orchestrator only, as a terminal's Ctrl-C or a scheduler's SIGTERM
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_stops_the_sweep_cleanly_and_its_resume_finishes_it(tmp_path: Path, sig: signal.Signals) -> None:
    fh = kill_host(tmp_path)
    try:
        rc, out = _interrupt(fh, sig)
        found = sweep_record(fh.db)
        assert found is not None, out
        sweep_id, states = found
        assert rc == 128 + sig.value, out
        assert f"sweep {sweep_id} started" in out, out
        assert "Traceback" not in out, out
        assert re.search(rf"interrupted \({sig.name}\): sweep {sweep_id}; \d+ server\(s\) of this sweep stopped; "
                         r"GPUs verified free", out), out  # fmt: skip
        # Nothing of the sweep runs on: no process of ours, no GPU held, no run left in flight in the store.
        assert fh.leftovers() == [] and fh.gpu_holders() == [], out
        assert states.get("pending", 0) == 0 and states.get("launched", 0) == 0, states
        with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
            (status,) = conn.execute("SELECT status FROM sweeps WHERE sweep_id = ?", (sweep_id,)).fetchone()
        assert status == "interrupted"

        printed = re.search(r"^resume with: (orchestrator sweep .*)$", out, re.MULTILINE)
        assert printed is not None, out
        words = shlex.split(printed.group(1))
        assert words[:5] == ["orchestrator", "sweep", str(fh.matrix_file), "--resume", sweep_id]
        resumed = subprocess.run(
            [sys.executable, "-m", *words], cwd=REPO, capture_output=True, text=True, timeout=180, env=cli_env()
        )
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert fh.table(sweep_id) == expected_table()
        assert fh.leftovers() == [] and fh.gpu_holders() == []
    finally:
        fh.reap()


def test_a_new_sweep_names_the_earlier_sweep_whose_servers_hold_the_gpus(tmp_path: Path) -> None:
    """After a `kill -9` (its servers live on), the next sweep is refused naming that sweep, not "not ours"."""
    fh = kill_host(tmp_path)
    try:
        proc = fh.spawn("sweep")
        try:
            wait_for(lambda: _launched(fh), 120, "a launch in flight")
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        found = sweep_record(fh.db)
        assert found is not None
        earlier = found[0]
        wait_for(lambda: fh.gpu_holders() != [], 30, "the earlier sweep's server to hold its GPU")
        second = fh.cli("sweep", timeout=120)
        text = second.stdout + second.stderr
        assert second.returncode == 1, text
        assert "Traceback" not in text and "not ours" not in text, text
        assert f"They are servers of sweep {earlier} (running; runs r-" in text, text
        assert f"--resume {earlier}" in text and "kill -TERM -- -" in text, text
        # The advice works: resuming the earlier sweep finishes it and clears the host.
        resumed = fh.cli("sweep", "--resume", earlier, timeout=180)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert fh.table(earlier) == expected_table()
        assert fh.leftovers() == [] and fh.gpu_holders() == []
    finally:
        fh.reap()
