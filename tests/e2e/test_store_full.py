"""The store's own disk fills up mid-sweep: the sweep stops saying so and how to finish it, and nothing is lost.

The store sits on a real 1 MiB tmpfs, filled once the sweep's record exists. The orchestrator must exit 1 naming
the failure and the exact resume command, leave no server running, and that command (once space is back) must
finish the sweep with the table of an uninterrupted one.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_faults_disk import fill, tiny_tmpfs
from tests.fault_harness import EXPECTED, FaultHost, cli_env, wait_for
from tests.paths import REPO

pytestmark = pytest.mark.slow


def _recorded(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT 1 FROM runs").fetchone() is not None
    except sqlite3.Error:
        return False


def test_a_full_store_stops_the_sweep_with_the_resume_command_and_loses_nothing(tmp_path: Path) -> None:
    fh = FaultHost(tmp_path / "host", load_s=0.5)
    with tiny_tmpfs(tmp_path / "store", fh) as store:
        db = store / "orchestrator.db"
        args = [sys.executable, "-m", "orchestrator", "sweep", str(fh.matrix_file), "--host", fh.name,
                "--hosts", str(fh.hosts_file), "--db", str(db), "--serial"]  # fmt: skip
        proc = subprocess.Popen(
            args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(),
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(lambda: _recorded(db), 60, "the sweep's first run in the store")
            fill(store)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, out
        assert "Traceback" not in out, out
        assert re.search(r"full|disk", out, re.IGNORECASE), out
        printed = re.search(r"finish it with: (orchestrator sweep .*)$", out, re.MULTILINE)
        assert printed is not None, out
        assert fh.leftovers() == [], "no server of the sweep runs on"
        (store / "filler").unlink()  # space is back
        resumed = subprocess.run(
            [sys.executable, "-m", *shlex.split(printed.group(1))], cwd=REPO, capture_output=True, text=True,
            timeout=300, env=cli_env(),
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        tables = subprocess.run(
            [sys.executable, "-m", "orchestrator", "table", "--format", "json", "--db", str(db)], cwd=REPO,
            capture_output=True, text=True, timeout=60, env=cli_env(),
        )  # fmt: skip
        cells = json.loads(tables.stdout)["cells"]
        assert {c["label"]: (c["status"], c["phase"], c["category"]) for c in cells} == {
            label: row[:3] for label, row in EXPECTED.items()
        }
        assert fh.leftovers() == [] and fh.gpu_holders() == []
