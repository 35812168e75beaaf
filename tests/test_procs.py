"""tests/procs.py: a run's processes are found by their mark or pid file, and a reused pid is never taken for one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import procs

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ORCH_TEST_PROCS_DIR", str(tmp_path))
    return tmp_path


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(SLEEP, env=env, start_new_session=True)
    deadline = time.monotonic() + 10
    while procs.start_time(proc.pid) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def test_the_processes_of_a_dead_run_are_reaped_by_mark_and_by_pid_file(registry: Path) -> None:
    dead = "999999999.1"  # no process has this pid: the run's owner is gone, as after a SIGKILL
    (registry / f"{dead}.run").write_text("999999999 1\n")
    marked = _spawn({**os.environ, procs.MARK_ENV: dead})
    unmarked = _spawn({k: v for k, v in os.environ.items() if k != procs.MARK_ENV})
    (registry / f"{dead}.{unmarked.pid}.pid").write_text(f"{unmarked.pid} {procs.start_time(unmarked.pid)} x\n")
    bystander = _spawn({k: v for k, v in os.environ.items() if k != procs.MARK_ENV})
    # A pid file whose start time is not the live process's: the pid was reused, so it is left alone.
    (registry / f"{dead}.{bystander.pid}.pid").write_text(f"{bystander.pid} 1 reused\n")
    try:
        assert procs.marked_processes(dead) == [marked.pid]
        assert sorted(procs.reap_stale()) == sorted([marked.pid, unmarked.pid])
        assert marked.wait(10) != 0 and unmarked.wait(10) != 0
        assert bystander.poll() is None
        assert list(registry.iterdir()) == []
    finally:
        for proc in (marked, unmarked, bystander):
            proc.kill()
            proc.wait()


def test_a_live_run_is_not_reaped(registry: Path) -> None:
    me = f"{os.getpid()}.{procs.start_time(os.getpid())}"
    (registry / f"{me}.run").write_text("\n")
    assert procs.reap_stale() == []
    assert (registry / f"{me}.run").exists()


def test_this_run_is_marked_and_its_children_inherit_the_mark() -> None:
    mark = procs.current_mark()
    assert mark is not None and mark.startswith(f"{os.getpid()}.")
    out = subprocess.run([sys.executable, "-c", f"import os; print(os.environ['{procs.MARK_ENV}'])"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == mark
