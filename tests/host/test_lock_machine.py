"""The host lock given the GPUs' UUIDs is the machine's (issue 35 item 6): two workdirs on one box, locally and over a
real loopback sshd, are refused like one; other GPUs, or no UUIDs, lock apart as before."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orchestrator.errors import HostBusy
from orchestrator.host.lock import HostLock, LockOwner, machine_lock_dir, parse_owner
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LocalTransport


def test_two_workdirs_on_one_machine_share_the_gpus_lock(transport: Transport, tmp_path: Path, gpus: list[str]) -> None:
    for workdir in ("alice", "bob", "carol", "dave"):  # the session makes the workdir before it locks
        (tmp_path / workdir).mkdir()
    first = HostLock(transport, str(tmp_path / "alice"), "s-alice", gpu_uuids=gpus)
    first.acquire()
    try:
        path = Path(machine_lock_dir(gpus))
        assert path.parent == Path("/tmp") and (path / "owner.json").exists()
        assert not (tmp_path / "alice" / "lock").exists()
        assert (path.stat().st_mode & 0o777, (path / "owner.json").stat().st_mode & 0o777) == (0o755, 0o644)
        second = HostLock(transport, str(tmp_path / "bob"), "s-bob", gpu_uuids=list(reversed(gpus)))
        with pytest.raises(HostBusy) as caught:
            second.acquire()
        message = str(caught.value)
        assert "the lock of its GPUs" in message and "sweep s-alice" in message, message
        assert f"from workdir {tmp_path / 'alice'}" in message and str(path) in message
        # Other GPUs of the same machine, and a caller that knows no GPUs, lock apart.
        others = [f"GPU-{uuid.uuid4()}"]
        apart = HostLock(transport, str(tmp_path / "carol"), "s-carol", gpu_uuids=others)
        apart.acquire()
        apart.release()
        assert not Path(machine_lock_dir(others)).exists()
        plain = HostLock(transport, str(tmp_path / "dave"), "s-dave")
        plain.acquire()
        assert (tmp_path / "dave" / "lock" / "owner.json").exists()
        plain.release()
    finally:
        first.release()
    assert not Path(machine_lock_dir(gpus)).exists()
    second.acquire()  # free again
    second.release()


def test_a_dead_sweeps_machine_lock_is_taken_over(tmp_path: Path, gpus: list[str]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = Path(machine_lock_dir(gpus))
    path.mkdir()
    owner = LockOwner(os.uname().nodename, dead.pid, "s-dead", 0.0, None, "tok", "/elsewhere")
    (path / "owner.json").write_bytes(owner.to_json())
    lock = HostLock(LocalTransport(), str(tmp_path / "w"), "s-new", gpu_uuids=gpus)
    lock.acquire()
    try:
        now = parse_owner((path / "owner.json").read_bytes())
        assert now is not None and now.sweep_id == "s-new" and now.workdir == str(tmp_path / "w")
    finally:
        lock.release()
