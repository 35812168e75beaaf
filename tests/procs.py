"""Every process a test run starts is ended by its id: at teardown, on SIGINT/SIGTERM, and, after a SIGKILL, next run.

A run is marked: `ORCH_TEST_RUN=<pytest pid>.<its start time>` is put in the environment before any test starts, so
every process the run starts inherits it (CLI children, simulated servers and their ranks, sshd) and the loopback
sshd passes it into its sessions (`SetEnv`), so servers launched over SSH carry it too. Helpers that start a process
also write a pid file (`<run>.<pid>.pid`, holding the process's start time) under one known directory, next to the
run's own record (`<run>.run`). Ending a run's processes means: every pid file whose process still has the recorded
start time (a reused pid never matches), and every live process whose initial environment carries the run's mark,
SIGTERM to each (to its group when it leads one), SIGKILL to what is left after a grace.

A run killed with SIGKILL leaves its record behind; the next run finds records whose owner is gone and ends their
processes the same way. Nothing is ever found by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

MARK_ENV = "ORCH_TEST_RUN"
GRACE_S = 3.0


def registry_dir() -> Path:
    """The known directory of run records and pid files (per user)."""
    path = Path(
        os.environ.get("ORCH_TEST_PROCS_DIR") or Path(tempfile.gettempdir()) / f"orchestrator-tests-{os.getuid()}"
    )
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def current_mark() -> str | None:
    """This run's mark, once `begin_run` set it."""
    return os.environ.get(MARK_ENV)


def begin_run() -> str:
    """Reap what dead runs left, then mark this run (children inherit the mark) and record it."""
    reap_stale()
    me = os.getpid()
    mark = f"{me}.{start_time(me)}"
    os.environ[MARK_ENV] = mark
    (registry_dir() / f"{mark}.run").write_text(f"{me} {start_time(me)}\n")
    return mark


def register(pid: int, what: str = "") -> None:
    """Record a process this run started (with its start time, so a reused pid is never taken for it)."""
    mark = current_mark()
    started = start_time(pid)
    if mark is None or started is None:
        return
    (registry_dir() / f"{mark}.{pid}.pid").write_text(f"{pid} {started} {what}\n")


def end_run(mark: str | None = None) -> list[int]:
    """End every process of a run (default: this one) and remove its records; the pids that were still alive."""
    mark = mark or current_mark()
    if mark is None:
        return []
    targets = set(_pid_files(mark)) | set(marked_processes(mark))
    targets -= {os.getpid(), *_ancestors()}
    ended = _terminate(sorted(targets))
    for path in registry_dir().glob(f"{mark}.*"):
        with contextlib.suppress(OSError):
            path.unlink()
    return ended


def reap_stale() -> list[int]:
    """End the processes of every recorded run whose owner is gone (it was SIGKILLed); the pids ended."""
    ended: list[int] = []
    for record in registry_dir().glob("*.run"):
        mark = record.name[: -len(".run")]
        pid, _, started = mark.partition(".")
        if pid.isdigit() and str(start_time(int(pid))) == started:
            continue  # its owner still runs (a concurrent test run): not ours to end
        ended += end_run(mark)
    return ended


def marked_processes(mark: str) -> list[int]:
    """Live processes whose initial environment carries `mark`."""
    needle = f"{MARK_ENV}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and start_time(int(entry)) is not None:
            found.append(int(entry))
    return found


def _pid_files(mark: str) -> list[int]:
    pids = []
    for path in registry_dir().glob(f"{mark}.*.pid"):
        with contextlib.suppress(OSError, ValueError):
            pid, started = path.read_text().split()[:2]
            if start_time(int(pid)) == int(started):
                pids.append(int(pid))
    return pids


def _ancestors() -> list[int]:
    out, pid = [], os.getppid()
    while pid > 1:
        out.append(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            break
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return out


def _signal(pids: Iterable[int], sig: signal.Signals, starts: dict[int, int | None]) -> None:
    for pid in pids:
        if start_time(pid) != starts[pid]:
            continue  # gone, or the pid was reused since it was listed
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)  # a launch leads its group: its ranks go with it
            else:
                os.kill(pid, sig)


def _terminate(pids: list[int]) -> list[int]:
    starts = {pid: start_time(pid) for pid in pids}
    alive = [p for p in pids if starts[p] is not None]
    _signal(alive, signal.SIGTERM, starts)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(start_time(p) == starts[p] for p in alive):
        time.sleep(0.05)
    _signal([p for p in alive if start_time(p) == starts[p]], signal.SIGKILL, starts)
    return alive
