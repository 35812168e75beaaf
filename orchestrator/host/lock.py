"""One sweep at a time per host: a lock directory on the host that always says who holds it, with a heartbeat.

What is locked is the host's GPUs. Given their UUIDs, the lock is the machine's, whoever asks and from whatever
workdir: `/tmp/orchestrator-gpus-<hash of the UUIDs>`, so two engineers' sweeps on one box, or two entries of a
pool that name the same machine, are refused like two sweeps of one workdir. Without them (a caller that does not
know the GPUs yet) it is the workdir's, `<workdir>/lock`. A simulated host's GPUs are its own (their UUIDs derive
from its state), so simulated hosts on one machine still lock apart.

The lock is created whole: its owner file is written into a fresh directory that is then renamed
to the lock's path, and a rename onto an existing (non-empty) directory fails, so two orchestrators
racing for a host cannot both win and no one ever sees a lock without its owner. A lock whose
owner process is gone (same machine: pid dead, or reused by another process) or whose heartbeat
stopped long ago (another machine) is stale. Breaking it is a compare-and-delete under `flock`
on the workdir: only the very owner file judged stale is removed, so of several orchestrators
taking over the same stale lock at once exactly one wins.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from hashlib import sha256

from orchestrator.errors import ConnectionLost, HostBusy, OrchestratorError, TransportError
from orchestrator.transport.base import Transport
from orchestrator.transport.shell import ShellCommand

STALE_AFTER_S = 600.0
"""A heartbeat older than this from another machine means its orchestrator is gone."""
HEARTBEAT_S = 60.0
"""How often a holder rewrites its heartbeat, from a thread of its own: one cell can take far longer."""
MACHINE_LOCK_ROOT = "/tmp"
"""Where a machine-wide lock lives: every user may create there, and only its owner (or root) remove (sticky)."""

log = logging.getLogger(__name__)

_GUARD = 'exec 9< "$1" || exit 2; if command -v flock >/dev/null; then flock -w 10 9 || exit 2; fi'
# $1 workdir, $2 lock dir; stdin: the owner file. A temp dir renamed into place: the lock appears whole.
_CREATE = """t=$(mktemp -d "$2.new.XXXXXX") && chmod 755 "$t" || exit 2
cat > "$t/owner.json" && chmod 644 "$t/owner.json" || { rm -rf -- "$t"; exit 2; }
mv -T -- "$t" "$2" 2>/dev/null && exit 0
rm -rf -- "$t"; exit 1"""
# $1 workdir, $2 lock dir; stdin: the owner file exactly as it was judged stale (empty: it had none).
_BREAK_IF = f"""{_GUARD}
[ -d "$2" ] || exit 0
current=$(cat -- "$2/owner.json" 2>/dev/null; echo .)
expected=$(cat; echo .)
[ "$current" = "$expected" ] || exit 1
rm -rf -- "$2" 2>/dev/null || exit 3"""
# $1 workdir, $2 lock dir, $3 our token; stdin: the new owner file. Rewritten only while it is still ours.
_BEAT = f"""{_GUARD}
grep -qF -- "$3" "$2/owner.json" 2>/dev/null || exit 1
t=$(mktemp "$2/.owner.XXXXXX") || exit 2
cat > "$t" || {{ rm -f -- "$t"; exit 2; }}
mv -f -- "$t" "$2/owner.json" || exit 2"""


@dataclass(frozen=True)
class LockOwner:
    """Who holds a host: machine, process (and when it started) and sweep."""

    hostname: str
    pid: int
    sweep_id: str
    heartbeat: float
    started: str | None = None
    """The process's start time (field 22 of /proc/<pid>/stat): a reused pid does not look like the holder."""
    token: str = ""
    workdir: str = ""
    """The holder's workdir on the host: with a machine-wide lock, not necessarily ours."""

    def describe(self) -> str:
        """`sweep s-... (pid 123 on box), last heartbeat 12 s ago`."""
        age = max(0.0, time.time() - self.heartbeat)
        where = f", from workdir {self.workdir}" if self.workdir else ""
        return f"sweep {self.sweep_id} (pid {self.pid} on {self.hostname}), last heartbeat {age:.0f} s ago{where}"

    def to_json(self) -> bytes:
        """The owner file's content."""
        return json.dumps(vars(self)).encode()


def is_stale(owner: LockOwner, *, here: str, pid_alive: bool, now: float) -> bool:
    """Whether a lock can be taken over: its process is gone, or it stopped beating long ago."""
    if owner.hostname == here:
        return not pid_alive
    return now - owner.heartbeat > STALE_AFTER_S


def parse_owner(raw: bytes) -> LockOwner | None:
    """The owner an owner file names, or None when it is missing or unreadable."""
    try:
        data = json.loads(raw or b"null")
        return LockOwner(
            str(data["hostname"]), int(data["pid"]), str(data["sweep_id"]), float(data["heartbeat"]),
            data.get("started"), str(data.get("token", "")), str(data.get("workdir", "")),
        )  # fmt: skip
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def machine_lock_dir(gpu_uuids: Sequence[str]) -> str:
    """The machine-wide lock of a set of GPUs (the same whatever their order)."""
    digest = sha256("\n".join(sorted(set(gpu_uuids))).encode()).hexdigest()[:16]
    return posixpath.join(MACHINE_LOCK_ROOT, f"orchestrator-gpus-{digest}")


class HostLock:
    """The lock of one host's GPUs (given their UUIDs), else of its working directory."""

    def __init__(
        self, transport: Transport, workdir: str, sweep_id: str, *, heartbeat_s: float = HEARTBEAT_S,
        gpu_uuids: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self.transport = transport
        self.workdir = workdir
        self.machine_wide = bool(gpu_uuids)
        # The folder whose flock guards a takeover: the lock's own parent.
        self.root = MACHINE_LOCK_ROOT if self.machine_wide else workdir
        self.dir = machine_lock_dir(gpu_uuids) if self.machine_wide else posixpath.join(workdir, "lock")
        self.owner_path = posixpath.join(self.dir, "owner.json")
        pid = os.getpid()
        self.me = LockOwner(
            socket.gethostname(), pid, sweep_id, time.time(), _start_time(pid), secrets.token_hex(8), workdir
        )
        self._heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; HostBusy names the live holder."""
        for _ in range(3):
            if self._create():
                self._start_beating()
                return
            raw = self.transport.read_range(self.owner_path, 0)
            owner = parse_owner(raw)
            if owner is None:
                # Only an older orchestrator leaves a lock without its owner, and only for a moment.
                time.sleep(0.5)
                raw = self.transport.read_range(self.owner_path, 0)
                owner = parse_owner(raw)
            if owner is not None and owner.token == self.me.token:
                self._start_beating()  # ours: the reply to our create was lost
                return
            if owner is not None and not self._stale(owner):
                scope = " (the lock of its GPUs, whatever the workdir or user)" if self.machine_wide else ""
                raise HostBusy(
                    f"the host is locked{scope} by {owner.describe()}; wait for it to finish, or remove {self.dir} "
                    "on the host if you are sure that sweep is dead"
                )
            if owner is not None:
                log.warning("%s: taking over the stale lock of %s", self.transport.describe(), owner.describe())
            self._break_if(raw)
        raise HostBusy(f"could not take the lock {self.dir}: other orchestrators keep taking it")

    def owner(self) -> LockOwner | None:
        """The current holder, if the lock exists and says who."""
        return parse_owner(self.transport.read_range(self.owner_path, 0))

    def heartbeat(self) -> bool:
        """Say we are still alive; False when the lock is no longer ours (taken over as stale)."""
        beat = replace(self.me, heartbeat=time.time())
        cmd = ShellCommand("sh", "-c", _BEAT, "lock-beat", self.root, self.dir, self.me.token)
        result = self.transport.run(cmd.raw(), timeout=30, stdin=beat.to_json())
        if result.exit_code == 2:
            raise self._cannot("write the heartbeat of", result.stderr_text)
        return result.ok

    def release(self) -> None:
        """Stop beating and give the lock back (only ours)."""
        self._stop.set()
        if self._beater is not None:
            self._beater.join()
        raw = self.transport.read_range(self.owner_path, 0)
        owner = parse_owner(raw)
        if owner is not None and owner.token == self.me.token:
            self._break_if(raw)

    def _stale(self, owner: LockOwner) -> bool:
        alive = owner.hostname == self.me.hostname and _pid_alive(owner.pid, owner.started)
        return is_stale(owner, here=self.me.hostname, pid_alive=alive, now=time.time())

    def _create(self) -> bool:
        # Never re-sent blindly: a lost reply reads as "not created", and the owner check that
        # follows finds our own token if it was.
        cmd = ShellCommand("sh", "-c", _CREATE, "lock-create", self.root, self.dir)
        try:
            result = self.transport.run(cmd.raw(), timeout=30, stdin=self.me.to_json(), idempotent=False)
        except ConnectionLost:
            return False
        if result.exit_code == 2:
            raise self._cannot("create the lock", result.stderr_text)
        return result.ok

    def _break_if(self, expected: bytes) -> None:
        cmd = ShellCommand("sh", "-c", _BREAK_IF, "lock-break", self.root, self.dir)
        result = self.transport.run(cmd.raw(), timeout=30, stdin=expected)
        if result.exit_code == 2:
            raise self._cannot("break the stale lock", result.stderr_text)
        if result.exit_code == 3:
            # Another user's, in a sticky folder: only they (or root) may remove it.
            raise HostBusy(
                f"the lock {self.dir} was left by a sweep that is gone, but it is not ours to remove (another user's);"
                f" ask its owner or root to remove {self.dir} on the host"
            )

    def _cannot(self, what: str, stderr: str) -> TransportError:
        return TransportError(f"{self.transport.describe()}: cannot {what} {self.dir}: {stderr.strip()}")

    def _start_beating(self) -> None:
        self._stop.clear()
        self._beater = threading.Thread(target=self._beat, name="lock-heartbeat", daemon=True)
        self._beater.start()

    def _beat(self) -> None:
        while not self._stop.wait(self._heartbeat_s):
            try:
                if not self.heartbeat():
                    log.error("%s: the lock %s is no longer ours (taken over as stale)", self.transport.describe(),
                              self.dir)  # fmt: skip
                    return
            except OrchestratorError as exc:
                # A missed beat only matters after STALE_AFTER_S; a full disk must not end the sweep.
                log.warning("%s: heartbeat of %s failed: %s", self.transport.describe(), self.dir, exc)


class HostLocks:
    """Every lock a sweep holds on one host, taken in the one order there is: its GPUs' (machine-wide, when the
    placement names them), then its workdir's; given back in reverse.

    Both are needed: the GPUs' keeps two workdirs, users or pool entries on one box off the same GPUs, and the
    workdir's is the only lock of a host whose GPUs are not ours to list (a Slurm cluster's login node), keeps two
    entries naming different GPU counts of one box in one workdir apart (their GPU sets, so their GPU locks,
    differ), and is the one an older orchestrator takes. No deadlock is possible: a lock is never waited for (a
    held one refuses at once, HostBusy), what was taken is given back before the refusal is raised, and the order
    is the same for every taker, so of two sweeps after the same locks the one refused first holds nothing.
    """

    def __init__(self, transport: Transport, workdir: str, sweep_id: str, gpu_uuids: Sequence[str] = ()) -> None:
        self.order = [HostLock(transport, workdir, sweep_id, gpu_uuids=gpu_uuids)] if gpu_uuids else []
        self.order.append(HostLock(transport, workdir, sweep_id))
        self.held: list[HostLock] = []

    def acquire(self) -> None:
        """Take them all, in order; none stays held when one is refused (HostBusy names its holder)."""
        try:
            for lock in self.order:
                lock.acquire()
                self.held.append(lock)
        except BaseException:
            with contextlib.suppress(OrchestratorError):
                self.release()
            raise

    def release(self) -> None:
        """Give back every lock held, last taken first; the first error after trying them all (a host that is down
        keeps its locks until the sweep is resumed: they are the sweep's)."""
        errors: list[OrchestratorError] = []
        for lock in reversed(self.held):
            try:
                lock.release()
            except OrchestratorError as exc:
                errors.append(exc)
        self.held = []
        if errors:
            raise errors[0]


def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot, or None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


def _pid_alive(pid: int, started: str | None) -> bool:
    now = _start_time(pid)
    return now is not None and (started is None or now == started)
