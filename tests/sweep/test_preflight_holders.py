"""Which of the processes holding GPUs are our own servers: their run, from the directory they work in, and
their process group, from the host itself (a killed sweep may not have stored it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from orchestrator.config.model import HostConfig
from orchestrator.host.facts import GpuHolder
from orchestrator.host.session import HostSession
from orchestrator.sweep.preflight import OurServer, runs_of_holders
from orchestrator.transport.local import LocalTransport
from tests.procs import register


def test_a_holder_in_a_run_directory_is_named_with_its_run_and_process_group(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r-0123456789"
    run_dir.mkdir(parents=True)
    # A leader in a session of its own and the child that holds the GPU, as a launch starts a server and its ranks.
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], cwd=run_dir, start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    register(leader.pid, "a server in a run directory")
    assert leader.stdout is not None
    rank = int(leader.stdout.readline())
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    register(elsewhere.pid, "a process outside any run directory")
    session = HostSession(HostConfig(name="local", transport="sim", workdir=str(tmp_path)), LocalTransport())
    try:
        holders = [GpuHolder(rank, 0, 100, False), GpuHolder(elsewhere.pid, 1, 100, False)]
        found = runs_of_holders(session, holders)
        assert found == {rank: OurServer("r-0123456789", leader.pid)}
    finally:
        session.close()
        os.killpg(leader.pid, signal.SIGKILL)
        elsewhere.kill()
        for proc in (leader, elsewhere):
            proc.wait()
