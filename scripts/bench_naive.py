"""The naive baseline: SGLang's own launcher helper done over SSH (sglang-facts §6.1, `popen_launch_server`).

Per cell: connect, start the server with `nohup`, then check the process (`kill -0`) and `/health_generate`
and sleep 10 s between tries; once ready, the same probes as ours; then SIGKILL the process tree, copy the
whole log back and classify it (the same classifier as ours). No GPU check, no packing, no preflight.
The only extra is `echo $? > exit_code` after the server, read by the bench (not by the baseline) to know
when the server died.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench_env import BenchEnv

from orchestrator.classify.verdict import classify
from orchestrator.cli.classify import read_evidence
from orchestrator.host.session import SIM_BIN
from orchestrator.model import ProbeOutcome, ProbeResult, Verdict
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.decode import run_probes
from orchestrator.settings import Deadlines, ProbeSettings
from orchestrator.transport import LocalTransport, Transport, quote
from orchestrator.transport.ssh import SshTransport
from orchestrator.transport.tunnel import TunnelTransport

POLL_SLEEP_S = 10.0
HEALTH_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 40.0


@dataclass
class NaiveResult:
    """One naive launch: its verdict, when it started and ended, and when the server died (if it did)."""

    verdict: Verdict
    probes: tuple[ProbeResult, ...]
    started: float
    verdict_at: float
    died_at: float | None


class NaiveHost:
    """A simulated host driven the naive way: each cell on a fresh connection, everything by hand."""

    def __init__(self, env: BenchEnv, name: str, scenario: Path, probes: ProbeSettings):
        self.env = env
        self.dir = env.root / name
        self.scenario = scenario
        self.probes = probes
        self.dir.mkdir(parents=True, exist_ok=True)

    def connect(self) -> Transport:
        """A new connection (the baseline keeps none between cells)."""
        target = self.env.target()
        if target is None:
            return LocalTransport()
        conn = SshTransport(target)
        conn.run("true")
        return conn

    def run_cell(self, label: str, flags: list[str], gpus: str, port: int) -> NaiveResult:
        """Launch, poll every 10 s, probe, kill, copy the log, classify."""
        started = time.time()
        run = self.dir / label
        run.mkdir()
        conn = self.connect()
        try:
            pid = self._launch(conn, run, flags, gpus, port)
            client = self._client(conn, port)
            ready, died = self._wait(conn, client, pid, started)
            probes: tuple[ProbeResult, ...] = ()
            if ready:
                alive = lambda: self._alive(conn, pid)  # noqa: E731
                probes = run_probes(client, self.probes, is_alive=alive, deadlines=Deadlines(probe=15))
            client.close()
            conn.run(f"kill -s KILL -- -{pid} 2>/dev/null; true")
            log = self._copy_log(run / "server.log", run / "copied.log")
            outcome = ProbeOutcome(reached_ready=ready, probes=probes, process_died=died)
            verdict = classify(read_evidence(log), outcome)
        finally:
            conn.close()
        exit_file = run / "exit_code"
        died_at = exit_file.stat().st_mtime if exit_file.exists() else None
        return NaiveResult(verdict, probes, started, time.time(), died_at)

    def _launch(self, conn: Transport, run: Path, flags: list[str], gpus: str, port: int) -> int:
        env = {
            "ORCH_SIM_GPU_STATE": str(self.dir / "gpu-state"), "ORCH_SIM_GPUS": "8",
            "CUDA_VISIBLE_DEVICES": gpus, "PATH": f"{SIM_BIN}:/usr/local/bin:/usr/bin:/bin",
        }  # fmt: skip
        words = [sys.executable, "-m", "orchestrator.sim", "--scenario", str(self.scenario), *flags]
        server = " ".join(quote(w) for w in [*words, "--host", "127.0.0.1", "--port", str(port)])
        job = f"{server}; echo $? > exit_code"
        exports = " ".join(f"{k}={quote(v)}" for k, v in env.items())
        command = (
            f"cd {quote(str(run))} && {exports} setsid nohup sh -c {quote(job)} > server.log 2>&1 < /dev/null & echo $!"
        )
        return int(conn.run(command).text.strip())

    def _client(self, conn: Transport, port: int) -> ProbeClient:
        if isinstance(conn, SshTransport):
            return ProbeClient(f"http://127.0.0.1:{port}", transport=TunnelTransport(conn.open_channel))
        return ProbeClient(f"http://127.0.0.1:{port}")

    def _alive(self, conn: Transport, pid: int) -> bool:
        return conn.run(f"kill -0 {pid} 2>/dev/null").ok

    def _wait(self, conn: Transport, client: ProbeClient, pid: int, started: float) -> tuple[bool, bool]:
        """popen_launch_server's loop: process exited? health 200? else sleep 10 s. -> (ready, died)."""
        while True:
            if not self._alive(conn, pid):
                return False, True
            if client.health_generate(timeout=HEALTH_TIMEOUT_S) == 200:
                return True, False
            if time.time() - started > READY_TIMEOUT_S:
                return False, False
            time.sleep(POLL_SLEEP_S)

    def _copy_log(self, remote: Path, local: Path) -> Path:
        """The whole log, with OpenSSH's scp when over SSH (much faster than paramiko's SFTP), else cp."""
        sshd = self.env.sshd
        if sshd is None:
            shutil.copyfile(remote, local)
            return local
        subprocess.run(
            ["scp", "-q", "-F", "/dev/null", "-i", str(sshd.client_key), "-P", str(sshd.port),
             "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={sshd.known_hosts}",
             "-o", "StrictHostKeyChecking=yes", f"{sshd.user}@127.0.0.1:{remote}", str(local)],
            check=True, timeout=600,
        )  # fmt: skip
        return local

    def harvest(self, remote: Path) -> tuple[float, int, Verdict]:
        """Copy a log whole and classify it: (seconds, bytes moved, verdict)."""
        started = time.perf_counter()
        # Next to the original: in RAM when that is, so the copy's speed is the transfer's, not a disk's.
        local = self._copy_log(remote, remote.with_name("copied.log"))
        verdict = classify(read_evidence(local))
        seconds = time.perf_counter() - started
        size = local.stat().st_size
        local.unlink()
        return seconds, size, verdict
