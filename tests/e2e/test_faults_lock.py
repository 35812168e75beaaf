"""One sweep per host: a second is refused naming the first; a dead orchestrator's lock is taken over, safely.

The lock tests drive HostLock on this machine (the local transport runs the same shell as SSH
does); the sweep tests run the real CLI against the simulated host over the loopback sshd.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

import pytest

from orchestrator.errors import HostBusy
from orchestrator.host.lock import HostLock, LockOwner, machine_lock_dir, parse_owner
from orchestrator.host.session import SIM_BIN
from orchestrator.transport.local import LocalTransport
from tests.fault_harness import EXPECTED, FaultHost, wait_for
from tests.sshd_host import SshdHost


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant(workdir: Path, owner: LockOwner | None) -> None:
    """Leave a lock as a dead (or live) orchestrator would have (None: the old kind, without its owner file)."""
    (workdir / "lock").mkdir(parents=True)
    if owner is not None:
        (workdir / "lock" / "owner.json").write_bytes(owner.to_json())


def _owner(workdir: Path) -> LockOwner | None:
    path = workdir / "lock" / "owner.json"
    return parse_owner(path.read_bytes()) if path.exists() else None


def _contend(workdir: str, index: int, barrier: Barrier, done: Event, results: multiprocessing.Queue[str]) -> None:
    lock = HostLock(LocalTransport(), workdir, f"s-contender-{index}")
    barrier.wait()
    try:
        lock.acquire()
    except HostBusy as exc:
        results.put(f"busy {exc}")
        return
    results.put(f"won {index}")
    done.wait(30)  # hold it until every contender has tried: a release would let a late one in legitimately
    lock.release()


def test_concurrent_takeovers_of_a_stale_lock_have_exactly_one_winner(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for round_ in range(4):
        workdir = tmp_path / f"round-{round_}"
        _plant(workdir, LockOwner(socket.gethostname(), _dead_pid(), "s-dead", time.time() - 5, token="dead"))
        barrier, done, results = ctx.Barrier(4), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_contend, args=(str(workdir), i, barrier, done, results)) for i in range(4)]
        for proc in procs:
            proc.start()
        outcomes = sorted(results.get(timeout=30) for _ in procs)
        done.set()
        for proc in procs:
            proc.join(30)
        winners = [o for o in outcomes if o.startswith("won")]
        assert len(winners) == 1, outcomes
        winner = winners[0].split()[1]
        assert all(f"locked by sweep s-contender-{winner} " in o for o in outcomes if o.startswith("busy")), outcomes
        assert not (workdir / "lock").exists()  # the winner released it; no loser removed or recreated it


def test_stale_lock_detection_same_machine(tmp_path: Path) -> None:
    here = socket.gethostname()
    me = HostLock(LocalTransport(), str(tmp_path), "s-me").me
    cases = {
        "dead pid": (replace(me, pid=_dead_pid(), token="a"), True),
        "live pid, same process start": (replace(me, pid=os.getppid(), started=None, token="b"), False),
        "live pid reused by another process": (replace(me, pid=os.getppid(), started="1", token="c"), True),
        "another machine, beating": (replace(me, hostname=here + "-other", pid=1, token="d"), False),
        "another machine, silent for an hour": (
            replace(me, hostname=here + "-other", pid=1, heartbeat=time.time() - 3600, token="e"),
            True,
        ),
    }
    for name, (owner, stale) in cases.items():
        workdir = tmp_path / name.replace(" ", "-").replace(",", "")
        _plant(workdir, owner)
        lock = HostLock(LocalTransport(), str(workdir), "s-new")
        if stale:
            lock.acquire()
            held = _owner(workdir)
            assert held is not None and held.sweep_id == "s-new", name
            lock.release()
            assert not (workdir / "lock").exists(), name
        else:
            with pytest.raises(HostBusy, match=f"locked by sweep {owner.sweep_id} \\(pid {owner.pid} on "):
                lock.acquire()
            assert _owner(workdir) == owner, name


def test_lock_without_owner_file_is_taken_over(tmp_path: Path) -> None:
    _plant(tmp_path, None)
    lock = HostLock(LocalTransport(), str(tmp_path), "s-new")
    lock.acquire()
    held = _owner(tmp_path)
    assert held is not None and held.sweep_id == "s-new"
    lock.release()


def test_heartbeat_beats_while_held_and_never_retakes_a_lock_taken_over(tmp_path: Path) -> None:
    lock = HostLock(LocalTransport(), str(tmp_path), "s-beating", heartbeat_s=0.05)
    lock.acquire()
    first = _owner(tmp_path)
    assert first is not None
    wait_for(lambda: (_owner(tmp_path) or first).heartbeat > first.heartbeat, 5, "a heartbeat")
    other = replace(first, sweep_id="s-other", token="other", heartbeat=time.time())
    (tmp_path / "lock" / "owner.json").write_bytes(other.to_json())  # taken over as stale from elsewhere
    time.sleep(0.3)
    assert _owner(tmp_path) == other
    lock.release()  # not ours any more: left alone
    assert _owner(tmp_path) == other


@pytest.fixture
def ssh_host(sshd: SshdHost, tmp_path: Path) -> Iterator[FaultHost]:
    """The fault host over the session's sshd; its loads take seconds, so the first sweep still runs (and holds the
    lock) while the second is tried."""
    fh = FaultHost(tmp_path, sshd=sshd, load_s=2.0)
    yield fh
    fh.reap()


def _machine_lock(fh: FaultHost) -> Path:
    """Where a sweep on this host locks its GPUs: the machine-wide lock of their UUIDs, as its nvidia-smi lists them."""
    env = {**os.environ, "ORCH_SIM_GPU_STATE": str(fh.gpu_state), "ORCH_SIM_GPUS": str(fh.gpus)}
    out = subprocess.run(
        [str(SIM_BIN / "nvidia-smi"), "--query-gpu=index,uuid", "--format=csv,noheader"],
        capture_output=True, text=True, env=env, timeout=30,
    ).stdout  # fmt: skip
    uuids = [line.split(",")[1].strip() for line in out.splitlines() if "," in line][: fh.gpus]
    return Path(machine_lock_dir(uuids))


def _machine_owner(fh: FaultHost) -> LockOwner | None:
    path = _machine_lock(fh) / "owner.json"
    return parse_owner(path.read_bytes()) if path.exists() else None


def test_second_sweep_is_refused_naming_the_first_and_a_dead_ones_lock_is_taken_over(ssh_host: FaultHost) -> None:
    first = ssh_host.spawn("sweep", output=ssh_host.root / "first.out")
    try:
        wait_for(lambda: _machine_owner(ssh_host) is not None, 30, "the first sweep's lock")
        holder = _machine_owner(ssh_host)
        assert holder is not None and holder.pid == first.pid
        second = ssh_host.cli("sweep", timeout=60)
        assert second.returncode == 1, second.stdout + second.stderr
        message = " ".join(second.stderr.split())
        assert "the host is locked (the lock of its GPUs, whatever the workdir or user)" in message, message
        assert f"by sweep {holder.sweep_id} (pid {first.pid} on {socket.gethostname()})" in message, message
        assert _machine_owner(ssh_host) == holder  # refused without touching the lock
    finally:
        first.send_signal(signal.SIGKILL)  # dies holding the lock
        first.wait()
    ssh_host.reap()  # whatever the first one had launched: this test is about its lock
    assert _machine_owner(ssh_host) == holder
    third = ssh_host.cli("sweep", timeout=120)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"taking over the stale lock of sweep {holder.sweep_id} (pid {first.pid}" in " ".join(third.stderr.split())
    sweep_id = third.stdout.rsplit("orchestrator table ", 1)[1].split()[0]
    assert ssh_host.table(sweep_id) == EXPECTED
    assert not _machine_lock(ssh_host).exists()
