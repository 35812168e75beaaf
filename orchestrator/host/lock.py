"""One sweep at a time per host: a lock directory on the host, with a heartbeat.

`mkdir` is atomic on every POSIX filesystem, so two orchestrators racing for the same host
cannot both win. The owner file says who holds it; a lock whose owner process is gone (same
machine) or whose heartbeat stopped long ago (another machine) is stale and taken over.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
from dataclasses import dataclass

from orchestrator.errors import ConnectionLost, HostBusy
from orchestrator.transport.base import Transport
from orchestrator.transport.shell import quote

STALE_AFTER_S = 600.0
"""A heartbeat older than this from another machine means its orchestrator is gone."""


@dataclass(frozen=True)
class LockOwner:
    """Who holds a host: machine, process and sweep."""

    hostname: str
    pid: int
    sweep_id: str
    heartbeat: float

    def describe(self) -> str:
        """`sweep s-... (pid 123 on box), last heartbeat 12 s ago`."""
        age = max(0.0, time.time() - self.heartbeat)
        return f"sweep {self.sweep_id} (pid {self.pid} on {self.hostname}), last heartbeat {age:.0f} s ago"


def is_stale(owner: LockOwner, *, here: str, pid_alive: bool, now: float) -> bool:
    """Whether a lock can be taken over: its process is gone, or it stopped beating long ago."""
    if owner.hostname == here:
        return not pid_alive
    return now - owner.heartbeat > STALE_AFTER_S


class HostLock:
    """The lock of one host's working directory."""

    def __init__(self, transport: Transport, workdir: str, sweep_id: str):
        self.transport = transport
        self.dir = posixpath.join(workdir, "lock")
        self.owner_path = posixpath.join(self.dir, "owner.json")
        self.me = LockOwner(socket.gethostname(), os.getpid(), sweep_id, time.time())

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; HostBusy names the live holder."""
        for _ in range(3):
            if self._mkdir():
                self.heartbeat()
                return
            owner = self.owner()
            if owner is None:
                # Lost a race with a holder that has not written its owner file yet, or a crash in between.
                time.sleep(0.2)
                owner = self.owner()
                if owner is None:
                    self._break()
                    continue
            if owner.hostname == self.me.hostname and owner.pid == self.me.pid:
                self.heartbeat()
                return
            alive = owner.hostname == self.me.hostname and _pid_alive(owner.pid)
            if not is_stale(owner, here=self.me.hostname, pid_alive=alive, now=time.time()):
                raise HostBusy(
                    f"the host is locked by {owner.describe()}; wait for it to finish, or remove {self.dir} "
                    "on the host if you are sure that sweep is dead"
                )
            self._break()
        raise HostBusy(f"could not take the lock {self.dir} after breaking a stale one")

    def owner(self) -> LockOwner | None:
        """The current holder, if the lock exists and says who."""
        raw = self.transport.read_range(self.owner_path, 0)
        try:
            data = json.loads(raw or b"null")
            return LockOwner(str(data["hostname"]), int(data["pid"]), str(data["sweep_id"]), float(data["heartbeat"]))
        except (ValueError, TypeError, KeyError):
            return None

    def heartbeat(self) -> None:
        """Say we are still alive."""
        data = {
            "hostname": self.me.hostname,
            "pid": self.me.pid,
            "sweep_id": self.me.sweep_id,
            "heartbeat": time.time(),
        }
        self.transport.write_file(self.owner_path, json.dumps(data))

    def release(self) -> None:
        """Give the lock back (only ours)."""
        owner = self.owner()
        if owner is not None and (owner.hostname, owner.pid) == (self.me.hostname, self.me.pid):
            self._break()

    def _mkdir(self) -> bool:
        # Never re-sent blindly: a re-sent mkdir whose first reply was lost would find our own
        # directory and call it someone else's. A lost reply reads as "not taken"; the owner check
        # that follows then finds an ownerless lock and retakes it.
        try:
            return self.transport.run(f"mkdir {quote(self.dir)} 2>/dev/null", timeout=30, idempotent=False).ok
        except ConnectionLost:
            return False

    def _break(self) -> None:
        self.transport.run(f"rm -rf {quote(self.dir)}", timeout=30)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
