"""A resume on a host whose SGLang changed since the sweep started is refused: one table, one install."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fault_harness import FaultHost, cli_env, launch_in_flight, wait_for
from tests.paths import REPO

pytestmark = pytest.mark.slow


def test_a_resume_after_the_install_changed_is_refused_naming_the_change(tmp_path: Path) -> None:
    fh = FaultHost(tmp_path, load_s=1.0)
    try:
        first = subprocess.Popen(
            fh.args("sweep"), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env(),
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: launch_in_flight(fh.db), 120, "a launch in flight")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
            (sweep_id,) = conn.execute("SELECT sweep_id FROM sweeps").fetchone()
            (runs_before,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
        # The nightly upgrade lands between the interruption and the resume.
        fh.scenario.write_text(fh.scenario.read_text().replace("version: 0.5.9", "version: 0.5.23"))
        resumed = subprocess.run(
            [*fh.args("sweep"), "--resume", sweep_id], cwd=REPO, capture_output=True, text=True, timeout=120,
            env=cli_env(),
        )  # fmt: skip
        assert resumed.returncode == 1, resumed.stdout + resumed.stderr
        assert "changed since sweep" in resumed.stderr and "sglang 0.5.9 -> 0.5.23" in resumed.stderr, resumed.stderr
        assert "orchestrator compare" in resumed.stderr and "Traceback" not in resumed.stderr
        with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
            (runs_after,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
        assert runs_after == runs_before, "nothing was launched on the changed install"
        assert fh.leftovers() == [] and fh.gpu_holders() == [], "what the refused resume re-attached was finished"
    finally:
        fh.reap()
