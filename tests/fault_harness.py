"""A simulated host in a temp dir for the fault tests and scripts/kill_resume: files, CLI, what is left behind.

Everything a test starts runs with the test's own paths in its arguments or working directory, so
`leftovers()` finds exactly our processes by looking for those paths (never by program name), and
`reap()` ends only those.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.hosts import load_hosts
from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig, Matrix, effective_deadlines
from orchestrator.host.session import SIM_BIN
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.engine import EventSink, SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from tests.paths import REPO
from tests.sshd_host import SshdHost

Row = tuple[str | None, str | None, str | None, str]
"""A cell as the table shows it: (status, phase, category, attempts)."""

# triton dies on the first sampled request, flashinfer with an fp8 KV cache runs out of memory, torch_native
# hangs at model_load, the rest pass.
SCENARIO = """version: 0.5.9
gpus: {gpus}
timing: {{import_s: 0.02, init_s: 0.02, load_weights_s: {load_s}, memory_alloc_s: 0.02, capture_cuda_graph_s: 0.05,
         warmup_s: 0.02, decode_token_s: {decode_s}}}
rules:
  - when: {{attention-backend: triton}}
    fail: {{at: sampled_decode, kind: nan_in_probs}}
  - when: {{attention-backend: flashinfer, kv-cache-dtype: fp8_e4m3}}
    fail: {{at: memory_alloc, kind: cuda_oom}}
  - when: {{attention-backend: torch_native}}
    fail: {{at: model_load, kind: hang}}
"""

MATRIX = """name: faults
flags: {{model-path: /models/tiny, tp-size: 1}}
matrix:
  attention-backend: [flashinfer, triton]
  kv-cache-dtype: [bf16, fp8_e4m3]
{cells}{extra}probes: {{settle_s: 0.2, concurrent_requests: 4}}
load: off
"""
HANG_CELL = "  include: [{attention-backend: torch_native, tp-size: 2}]\n"
"""A fifth cell, on two GPUs, that hangs at model_load until its deadline."""

EXPECTED: dict[str, Row] = {
    "attention-backend=flashinfer, kv-cache-dtype=bf16": ("pass", "after_decode", "healthy", "1/1"),
    "attention-backend=flashinfer, kv-cache-dtype=fp8_e4m3": ("fail", "memory_alloc", "cuda_oom", "0/1"),
    "attention-backend=triton, kv-cache-dtype=bf16": ("fail", "sampled_decode", "nan_in_probs", "0/1"),
    "attention-backend=triton, kv-cache-dtype=fp8_e4m3": ("fail", "sampled_decode", "nan_in_probs", "0/1"),
}
"""The table MATRIX comes to on SCENARIO: label -> (status, phase, category, attempts)."""
HANG_LABEL = "attention-backend=torch_native, tp-size=2"
HANG_ROW: Row = ("fail", "model_load", "hang_or_timeout", "0/1")


@dataclass
class FaultHost:
    """One simulated host (local, or over a loopback sshd) with its scenario, matrix, store and workdir."""

    root: Path
    sshd: SshdHost | None = None
    gpus: int = 4
    decode_s: float = 0.002
    load_s: float = 0.05
    deadlines: dict[str, str] = field(
        default_factory=lambda: {"model_load": "10s", "ready": "20s", "probe": "10s", "stop_grace": "2s"}
    )
    env: dict[str, str] = field(default_factory=dict)
    name: str = "faulty"

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(exist_ok=True)
        self.write_scenario()
        self.write_hosts()
        self.write_matrix()

    @property
    def workdir(self) -> Path:
        """The host's working directory (run dirs, lock, the sim's GPU state)."""
        return self.root / "host"

    @property
    def scenario(self) -> Path:
        """The sim's scenario file."""
        return self.root / "scenario.yaml"

    @property
    def hosts_file(self) -> Path:
        """hosts.yaml with this one host."""
        return self.root / "hosts.yaml"

    @property
    def matrix_file(self) -> Path:
        """The matrix file."""
        return self.root / "matrix.yaml"

    @property
    def db(self) -> Path:
        """The store."""
        return self.root / "orchestrator.db"

    @property
    def gpu_state(self) -> Path:
        """The sim's GPU state directory (what its fake nvidia-smi reads)."""
        return Path(self.env.get("ORCH_SIM_GPU_STATE", self.workdir / "gpu-state"))

    def write_scenario(self) -> None:
        """Write SCENARIO with this host's GPUs and timings."""
        self.scenario.write_text(SCENARIO.format(gpus=self.gpus, load_s=self.load_s, decode_s=self.decode_s))

    def write_matrix(self, extra: str = "", cells: str = "") -> None:
        """Write MATRIX with `cells` lines in its matrix section and `extra` top-level lines (`on_infra: stop\\n`)."""
        self.matrix_file.write_text(MATRIX.format(cells=cells, extra=extra))

    def write_hosts(self) -> None:
        """Write hosts.yaml: over the loopback sshd if there is one, else the local sim transport."""
        entry: dict[str, Any] = {
            "launcher": f"{sys.executable} -m orchestrator.sim",
            "scenario": str(self.scenario),
            "gpus": self.gpus,
            "workdir": str(self.workdir),
            "python": sys.executable,
            "deadlines": self.deadlines,
            "env": self.env,
            # Below the ephemeral range and away from the default 30000 that other sweeps on this machine use.
            "port_base": 10000 + zlib.crc32(str(self.root).encode()) % 4000,
        }
        if self.sshd is None:
            entry["transport"] = "sim"
        else:
            entry |= {
                "ssh": f"{self.sshd.user}@127.0.0.1:{self.sshd.port}",
                "identity_file": str(self.sshd.client_key),
                "known_hosts": str(self.sshd.known_hosts),
            }
        self.hosts_file.write_text(json.dumps({self.name: entry}, indent=1))

    def host(self) -> HostConfig:
        """This host as the orchestrator loads it."""
        return load_hosts(self.hosts_file)[self.name]

    def matrix(self) -> Matrix:
        """The matrix as the orchestrator loads it."""
        return load_matrix(self.matrix_file)

    def args(self, command: str, *extra: str) -> list[str]:
        """An orchestrator command line against this host and store."""
        if command == "sweep":
            return [sys.executable, "-m", "orchestrator", command, str(self.matrix_file), "--host", self.name,
                    "--hosts", str(self.hosts_file), "--db", str(self.db), *extra]  # fmt: skip
        if command == "run":
            return [sys.executable, "-m", "orchestrator", "run", "--host", self.name, "--hosts", str(self.hosts_file),
                    "--db", str(self.db), *extra]  # fmt: skip
        return [sys.executable, "-m", "orchestrator", command, *extra, "--db", str(self.db)]

    def cli(self, command: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run an orchestrator command to completion."""
        return subprocess.run(
            self.args(command, *extra), cwd=REPO, capture_output=True, text=True, timeout=timeout, env=cli_env()
        )

    def spawn(self, command: str, *extra: str, output: Path | None = None) -> subprocess.Popen[str]:
        """Start an orchestrator command in its own process group, its output piped (or appended to `output`)."""
        with open(output, "a") if output else contextlib.nullcontext() as sink:
            return subprocess.Popen(
                self.args(command, *extra), cwd=REPO, stdout=sink or subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=cli_env(), start_new_session=True,
            )  # fmt: skip

    def table(self, sweep: str | None = None) -> dict[str, Row]:
        """The stored table of a sweep (the latest by default): label -> (status, phase, category, attempts)."""
        result = self.cli("table", *([sweep] if sweep else []), "--format", "json", timeout=60)
        assert result.returncode == 0, result.stderr
        cells = json.loads(result.stdout)["cells"]
        return {c["label"]: (c["status"], c["phase"], c["category"], c["attempts"]) for c in cells}

    def launch_counts(self) -> dict[str, int]:
        """Launches as the host saw them: run dirs, pid files, `server_args=` log lines, the sim's own counter."""
        runs = sorted((self.workdir / "runs").glob("r-*")) if (self.workdir / "runs").is_dir() else []
        logs = [r / "server.log" for r in runs if (r / "server.log").exists()]
        counter = self.gpu_state / "launches"
        return {
            "run_dirs": len(runs),
            "pid_files": sum((r / "pid").exists() for r in runs),
            "server_args": sum(log.read_text(errors="replace").count("server_args=") for log in logs),
            "sim_launches": int(counter.read_text().strip() or 0) if counter.exists() else 0,
        }

    def gpu_holders(self) -> list[str]:
        """What the sim's fake nvidia-smi says holds GPU memory (one `pid, uuid, MiB` line each)."""
        env = {**os.environ, "ORCH_SIM_GPU_STATE": str(self.gpu_state), "ORCH_SIM_GPUS": str(self.gpus)}
        out = subprocess.run(
            [str(SIM_BIN / "nvidia-smi"), "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader"],
            capture_output=True, text=True, env=env, timeout=30,
        ).stdout  # fmt: skip
        return [line for line in out.splitlines() if line.strip() and line[0].isdigit()]

    def leftovers(self, wait_s: float = 5.0) -> list[str]:
        """Our processes still alive after up to `wait_s` (commands finishing on their own get that long)."""
        deadline = time.monotonic() + wait_s
        while True:
            found = our_processes(self.root)
            if not found or time.monotonic() > deadline:
                return [f"pid {pid}: {cmd}" for pid, cmd in found]
            time.sleep(0.1)

    def reap(self) -> None:
        """End every process of ours (by its process group when that group is not the test's own)."""
        for pid, _ in our_processes(self.root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                pgid = os.getpgid(pid)
                if pgid != os.getpgrp():
                    os.killpg(pgid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)


def cli_env() -> dict[str, str]:
    """The environment of an orchestrator subprocess: unbuffered, no store override."""
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}
    return env | {"PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def our_processes(root: Path) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose arguments or working directory point into `root`."""
    marker = str(root.resolve())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except (OSError, IndexError):
            continue
        if marker in cmd or cwd == marker or cwd.startswith(marker + "/"):
            found.append((pid, cmd[:200]))
    return found


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll `predicate()` until true; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def sweep_in_process(
    fh: FaultHost, *, packed: bool = True, on_event: EventSink | None = None,
    on_result: Callable[[AttemptResult], None] | None = None,
) -> str:  # fmt: skip
    """Run the matrix on the host in this process (hooks see every event); returns the sweep id."""
    matrix, host = fh.matrix(), fh.host()
    options = SweepOptions(packed=packed, settings=RunSettings(effective_deadlines(host, matrix), matrix.probes))
    with Store(fh.db) as store:
        return run_sweep(store, matrix, [host], options, SweepHooks(on_event=on_event, on_result=on_result)).sweep_id


def launch_in_flight(db: Path) -> bool:
    """Whether the store at `db` holds a run launched and not finished (False before the store exists)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT 1 FROM runs WHERE state = 'launched'").fetchone() is not None
    except sqlite3.OperationalError:
        return False
