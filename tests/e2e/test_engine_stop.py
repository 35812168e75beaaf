"""Ctrl-C and SIGTERM of a pool sweep stop each run on the host that launched it, and nowhere else.

Two real loopback sshd, each in a PID namespace of its own, as two machines are: a process group number
means something only in its own host's process table. Host b's launches are given numbers far above
host a's, and a decoy process is started on host a under the very process group number of a run on b
while it is in flight. The signal must stop b's server on b, leave the decoy on a alone, leave nothing of
the sweep running on either host, and its resume must finish with the table of an uninterrupted sweep.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests import sshd_host
from tests.e2e.pool_support import pool_files, pool_sweep_running, verdict_of
from tests.fault_harness import cli_env, our_processes, wait_for
from tests.paths import REPO
from tests.sshd_host import SshdHost, login_user

pytestmark = [pytest.mark.ssh, pytest.mark.slow]

B_PIDS_FROM = 20000
"""Host b's PID namespace hands out numbers from here: its process groups never exist on host a by chance."""
DECOY = "sleep 86400"
MEMBER: dict[str, Any] = {"gpus": 1, "load_s": 2.0, "decode_s": 0.01}
"""Each host of the pool: one GPU, and a 2 s model load that keeps a launch in flight when the signal lands."""


class StartPair(Protocol):
    """Starts two loopback sshd of the test's own (the `sshd_pair` fixture)."""

    def __call__(self, *, own_pid_namespaces: bool = False) -> tuple[SshdHost, SshdHost]: ...


@pytest.fixture
def sshd_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StartPair]:
    """Two sshd of this test alone (it may stop one), each with `own_pid_namespaces` the first process of a PID
    namespace of its own (ended with it: --kill-child); all stopped and removed after the test."""
    started: list[SshdHost] = []

    def start(*, own_pid_namespaces: bool = False) -> tuple[SshdHost, SshdHost]:
        if own_pid_namespaces:
            wrapper = tmp_path / "sshd-in-own-pid-namespace"
            unshare = "unshare --pid --fork --kill-child --mount-proc"
            wrapper.write_text(f'#!/bin/sh\nexec {unshare} {sshd_host.SSHD} "$@"\n')
            wrapper.chmod(0o755)
            monkeypatch.setattr(sshd_host, "SSHD", str(wrapper))
        for _ in range(2):
            started.append(SshdHost(login_user()).start())
        return started[-2], started[-1]

    try:
        yield start
    finally:
        for host in started:
            host.cleanup()


def _ssh(host: SshdHost, command: str) -> str:
    """Run a shell command on the host, over its own sshd (in its namespace); its output."""
    out = subprocess.run(
        ["ssh", "-p", str(host.port), "-i", str(host.client_key), "-o", f"UserKnownHostsFile={host.known_hosts}",
         "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", f"{host.user}@127.0.0.1", command],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def _in_flight_on(db: Path, host: str) -> int | None:
    """The process group of a run of `host` launched and not finished, if any."""
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            row = conn.execute(
                "SELECT pgid FROM runs WHERE host = ? AND state = 'launched' AND pgid IS NOT NULL", (host,)
            ).fetchone()
        except sqlite3.OperationalError:
            return None
    return int(row[0]) if row else None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_stops_each_run_on_its_own_host_and_nothing_else(
    sshd_pair: StartPair, tmp_path: Path, sig: signal.Signals
) -> None:
    namespaced_sshd = host_a, host_b = sshd_pair(own_pid_namespaces=True)
    _ssh(host_b, f"echo {B_PIDS_FROM} > /proc/sys/kernel/ns_last_pid")
    hosts_file, members = pool_files(tmp_path, namespaced_sshd, **MEMBER)
    db = tmp_path / "orchestrator.db"
    with pool_sweep_running(tmp_path, hosts_file, db) as proc:
        wait_for(lambda: _in_flight_on(db, "b") is not None, 120, "a launch in flight on host b")
        pgid = _in_flight_on(db, "b")
        assert pgid is not None and pgid > B_PIDS_FROM, pgid
        # A stranger's process on host a under that very process group number (a's numbers are far lower).
        _ssh(host_a, f"echo {pgid - 1} > /proc/sys/kernel/ns_last_pid; setsid {DECOY} </dev/null >/dev/null 2>&1 &")
        decoy = _ssh(host_a, f"ps -o pgid=,args= -p {pgid} || true").split(None, 1)
        assert decoy and int(decoy[0]) == pgid and DECOY in decoy[1], decoy
        assert _in_flight_on(db, "b") == pgid, "the run on b is still in flight when the signal lands"
        proc.send_signal(sig)  # the orchestrator only, as a terminal's Ctrl-C or a scheduler's SIGTERM
        out, _ = proc.communicate(timeout=180)
    try:
        assert proc.returncode == 128 + sig.value, out
        assert "Traceback" not in out, out
        assert re.search(r"server\(s\) of this sweep stopped; GPUs verified free", out), out
        # The decoy on a lives; nothing of the sweep runs on either host; no GPU is held on either.
        assert DECOY in _ssh(host_a, f"ps -o args= -p {pgid} || true"), "the stranger's process on host a survived"
        time.sleep(0.5)
        assert our_processes(tmp_path) == [], out
        assert [fh.gpu_holders() for fh in members] == [[], []], out
        for host in namespaced_sshd:  # seen from inside each host too: no group of the sweep is left
            assert "orchestrator.sim" not in _ssh(host, "ps -eo args="), out

        printed = re.search(r"^resume with: (orchestrator sweep .*)$", out, re.MULTILINE)
        assert printed is not None, out
        words = shlex.split(printed.group(1))
        resumed = subprocess.run(
            [sys.executable, "-m", *words], cwd=REPO, capture_output=True, text=True, timeout=300, env=cli_env()
        )
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        table = subprocess.run(
            [sys.executable, "-m", "orchestrator", "table", "--format", "json", "--db", str(db)],
            cwd=REPO, capture_output=True, text=True, timeout=60, env=cli_env(),
        )  # fmt: skip
        cells = json.loads(table.stdout)["cells"]
        assert len(cells) == 8
        for cell in cells:  # the table of an uninterrupted sweep: each cell's own verdict, on whichever host
            assert (cell["status"], cell["category"]) == verdict_of(cell["label"]), cell
        assert our_processes(tmp_path) == []
        assert DECOY in _ssh(host_a, f"ps -o args= -p {pgid} || true")
    finally:
        for fh in members:
            fh.reap()


def test_a_signal_names_the_host_it_could_not_reach_and_never_calls_its_gpus_free(
    sshd_pair: StartPair, tmp_path: Path
) -> None:
    two_sshd = sshd_pair()
    hosts_file, members = pool_files(tmp_path, two_sshd, **MEMBER)
    db = tmp_path / "orchestrator.db"
    with pool_sweep_running(tmp_path, hosts_file, db) as proc:
        wait_for(lambda: _in_flight_on(db, "a") is not None and _in_flight_on(db, "b") is not None, 120,
                 "a launch in flight on each host")  # fmt: skip
        two_sshd[1].stop()  # host b is unreachable from now on; its server runs on
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=180)
    try:
        assert proc.returncode == 130, out
        assert "GPUs NOT verified free" in out and "GPUs verified free" not in out.replace("NOT verified", ""), out
        unreached = r"host b: could not stop its servers or check its GPUs \(.+\); `--resume` stops them"
        assert re.search(unreached, out), out
        assert "host a:" not in out, "host a was reached: its servers stopped and its GPUs checked"
        assert members[0].gpu_holders() == [], "host a's GPUs are free"
        # Once b is back, the printed resume stops what was left there and finishes the sweep.
        two_sshd[1].start()
        printed = re.search(r"^resume with: (orchestrator sweep .*)$", out, re.MULTILINE)
        assert printed is not None, out
        resumed = subprocess.run(
            [sys.executable, "-m", *shlex.split(printed.group(1))], cwd=REPO, capture_output=True, text=True,
            timeout=300, env=cli_env(),
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert our_processes(tmp_path) == [] and [fh.gpu_holders() for fh in members] == [[], []]
    finally:
        for fh in members:
            fh.reap()
