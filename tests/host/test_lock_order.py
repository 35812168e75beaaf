"""A host's two locks (host/lock.HostLocks): its GPUs' then its workdir's, always in that order, and a refusal at
either leaves the refused sweep holding nothing, so two sweeps after the same locks can never each hold one."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from orchestrator.errors import HostBusy
from orchestrator.host.lock import HostLocks, LockOwner, machine_lock_dir
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LocalTransport


def _workdir(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.mkdir()
    return str(path)


def test_both_are_held_while_the_sweep_runs_and_given_back(
    transport: Transport, tmp_path: Path, gpus: list[str]
) -> None:
    workdir = _workdir(tmp_path, "w")
    locks = HostLocks(transport, workdir, "s-1", gpus)
    locks.acquire()
    try:
        assert [lock.dir for lock in locks.held] == [machine_lock_dir(gpus), f"{workdir}/lock"]
        assert Path(machine_lock_dir(gpus), "owner.json").is_file() and Path(workdir, "lock", "owner.json").is_file()
    finally:
        locks.release()
    assert locks.held == []
    assert not Path(machine_lock_dir(gpus)).exists() and not Path(workdir, "lock").exists()


def test_refused_at_the_workdir_lock_the_gpus_lock_is_given_back(
    transport: Transport, tmp_path: Path, gpus: list[str]
) -> None:
    workdir = _workdir(tmp_path, "w")
    # A live holder of the workdir's lock only (an older orchestrator), on this machine: this process.
    older = LockOwner(socket.gethostname(), os.getpid(), "s-older", time.time(), token="older")
    Path(workdir, "lock").mkdir()
    Path(workdir, "lock", "owner.json").write_bytes(older.to_json())
    locks = HostLocks(transport, workdir, "s-new", gpus)
    with pytest.raises(HostBusy, match="locked by sweep s-older"):
        locks.acquire()
    assert locks.held == [] and not Path(machine_lock_dir(gpus)).exists()
    assert Path(workdir, "lock", "owner.json").read_bytes() == older.to_json()  # the holder's lock untouched


def test_refused_at_the_gpus_lock_the_workdir_is_never_locked(
    transport: Transport, tmp_path: Path, gpus: list[str]
) -> None:
    first = HostLocks(transport, _workdir(tmp_path, "alice"), "s-alice", gpus)
    first.acquire()
    try:
        second = HostLocks(transport, _workdir(tmp_path, "bob"), "s-bob", gpus)
        with pytest.raises(HostBusy, match="the lock of its GPUs"):
            second.acquire()
        assert second.held == [] and not (tmp_path / "bob" / "lock").exists()
    finally:
        first.release()


def test_two_sweeps_racing_for_the_same_locks_never_each_hold_one(tmp_path: Path, gpus: list[str]) -> None:
    # Two entries naming one box in one workdir with different GPU counts: their GPUs' locks differ, so both take
    # theirs and the workdir's decides; the one refused must give its GPUs' lock back, or a third entry naming
    # those GPUs would be refused by a sweep that never ran.
    for round_ in range(8):
        workdir = _workdir(tmp_path, f"round-{round_}")
        sets = [HostLocks(LocalTransport(), workdir, f"s-{i}", some) for i, some in enumerate((gpus, gpus[:1]))]
        barrier = threading.Barrier(2)
        refused: list[HostLocks] = []

        def take(locks: HostLocks, barrier: threading.Barrier = barrier, refused: list[HostLocks] = refused) -> None:
            barrier.wait()
            try:
                locks.acquire()
            except HostBusy:
                refused.append(locks)

        threads = [threading.Thread(target=take, args=(locks,)) for locks in sets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(refused) == 1, round_
        (winner,) = [locks for locks in sets if locks not in refused]
        assert refused[0].held == [] and len(winner.held) == 2
        gone = [lock.dir for lock in refused[0].order[:1]]
        assert not Path(gone[0]).exists()  # the loser's GPUs' lock was given back before it was refused
        winner.release()
        assert not Path(workdir, "lock").exists() and not Path(winner.order[0].dir).exists()
