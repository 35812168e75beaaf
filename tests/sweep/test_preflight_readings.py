"""When nvidia-smi gives no reading, preflight never takes the GPUs for free: ending a foreign holder whose GPU
cannot be read again SIGKILLs it and refuses the host, naming what nvidia-smi said.

The host's GPUs are read through `facts.read_gpu_processes`, which raises NoGpuReading on a failed query: a
real local host with a real (failing) nvidia-smi on its PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.config.model import HostConfig
from orchestrator.host import facts
from orchestrator.host.session import HostSession
from orchestrator.sweep.preflight import HostNotReady, end_foreign_holders
from orchestrator.transport.local import LocalTransport
from tests.procs import register

DRIVER_GONE = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."


def test_a_holder_whose_gpu_cannot_be_read_is_killed_and_the_host_refused(tmp_path: Path) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\necho {json.dumps(DRIVER_GONE)}\nexit 9\n")
    smi.chmod(0o755)
    # A holder that ignores SIGTERM, as a wedged server does.
    holder = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], start_new_session=True)
    register(holder.pid, "a GPU holder that ignores SIGTERM")
    config = HostConfig(
        name="driverless", transport="local", workdir=str(tmp_path / "work"), gpus=1,
        env={"PATH": f"{smi.parent}:{os.environ['PATH']}"}, deadlines={"stop_grace": 0.3, "gpu_release": 0.3},
    )  # fmt: skip
    session = HostSession(config, LocalTransport())
    try:
        with pytest.raises(HostNotReady) as refused:
            end_foreign_holders(session, [facts.GpuHolder(holder.pid, 0, 70000, False)])
        said = str(refused.value)
        assert said.startswith("GPUs on driverless could not be checked after ending their holders: nvidia-smi failed")
        assert DRIVER_GONE in said and "Nothing was launched" in said
        assert holder.wait(timeout=10) == -9  # unknown is not free: the SIGKILL followed
    finally:
        session.close()
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_an_empty_answer_of_a_working_nvidia_smi_frees_the_gpu(tmp_path: Path) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nexit 0\n")  # no compute process: nothing printed, exit 0
    smi.chmod(0o755)
    holder = subprocess.Popen(["sleep", "60"], start_new_session=True)
    register(holder.pid, "a GPU holder that ends on SIGTERM")
    config = HostConfig(name="h", transport="local", workdir=str(tmp_path / "work"), gpus=1,
                        env={"PATH": f"{smi.parent}:{os.environ['PATH']}"})  # fmt: skip
    session = HostSession(config, LocalTransport())
    try:
        end_foreign_holders(session, [facts.GpuHolder(holder.pid, 0, 1, False)])
        assert holder.wait(timeout=10) == -15
    finally:
        session.close()
        if holder.poll() is None:
            holder.kill()
            holder.wait()
