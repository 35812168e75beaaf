"""Helpers of the fault-injection tests (tests/e2e/test_faults_*.py): simulated hosts, sweeps, holders, clean-up.

Everything started here is stopped by the process group it was started in, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.config.load import load_hosts, load_matrix
from orchestrator.config.model import effective_deadlines
from orchestrator.store.sqlite import Store
from orchestrator.sweep import engine
from orchestrator.sweep.engine import SweepHooks, SweepOptions
from orchestrator.sweep.execute import RunSettings
from tests import simhost
from tests.paths import REPO
from tests.simhost import random_port_base
from tests.sshd_host import SshdHost

NVIDIA_SMI = REPO / "orchestrator" / "sim" / "bin" / "nvidia-smi"
HOST = "faulthost"
FAST = {
    "model_load": "1.5s",
    "memory_alloc": "1.5s",
    "cuda_graph_capture": "1.5s",
    "ready": "3s",
    "probe": "2s",
    "stop_grace": "1s",
    "gpu_release": "3s",
}
"""Deadlines of a few seconds: the simulated phases take hundredths of one."""


def port_base() -> int:
    """A port base of our own (see random_port_base)."""
    return random_port_base()


def write_scenario(path: Path, rules: list[dict[str, Any]], gpus: int = 8) -> Path:
    """A scenario of SGLang 0.5.9 with fast phases and these rules."""
    timing = {"import_s": 0.02, "load_weights_s": 0.05, "memory_alloc_s": 0.02, "capture_cuda_graph_s": 0.05}
    path.write_text(yaml.safe_dump({"version": "0.5.9", "gpus": gpus, "timing": timing, "rules": rules}))
    return path


def write_hosts(
    path: Path,
    workdir: Path,
    scenario: Path,
    *,
    sshd: SshdHost | None = None,
    gpus: int = 8,
    **extra: Any,
) -> Path:
    """A hosts.yaml with one simulated host `faulthost` (over the loopback sshd when given); `extra` adds keys."""
    return simhost.write_hosts(
        path, workdir, scenario=scenario, sshd=sshd, gpus=gpus, deadlines=FAST, name=HOST,
        port_base=port_base(), **extra,
    )  # fmt: skip


def write_matrix(path: Path, **doc: Any) -> Path:
    """A matrix file for `faulthost`; string values of any content are written safely quoted.

    Without a `load:` of its own the speed load is off: these tests are about other things, and the speed tests
    (tests/e2e/test_speed.py) give theirs.
    """
    path.write_text(yaml.safe_dump({"host": HOST, "load": "off", **doc}, sort_keys=False, allow_unicode=True))
    return path


def cli(
    *args: str, db: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child process, as a user does."""
    return simhost.orchestrator(*args, db=db, env=env, timeout=timeout)


def run_sweep(
    matrix_path: Path, hosts_path: Path, db: Path, *, packed: bool = True, hooks: SweepHooks | None = None
) -> str:
    """Run a sweep in this process (so hooks can look at live servers); returns its id."""
    matrix = load_matrix(matrix_path)
    host = load_hosts(hosts_path)[HOST]
    options = SweepOptions(
        packed=packed, settings=RunSettings(effective_deadlines(host, matrix), matrix.probes), retries=matrix.retries
    )
    with Store(db) as store:
        return engine.run_sweep(store, matrix, [host], options, hooks or SweepHooks()).sweep_id


@dataclass(frozen=True)
class Holding:
    """One line of the fake nvidia-smi's compute-apps query."""

    pid: int
    gpu: int
    mib: int


def gpu_holders(workdir: Path) -> list[Holding]:
    """Who holds which simulated GPU of the host whose workdir this is, as its nvidia-smi says."""
    state = {**os.environ, "ORCH_SIM_GPU_STATE": str(workdir / "gpu-state")}
    query = ["--query-gpu=index,uuid", "--format=csv,noheader"]
    gpus = subprocess.run([str(NVIDIA_SMI), *query], capture_output=True, text=True, env=state, timeout=30).stdout
    index = {uuid.strip(): int(i) for i, uuid in (line.split(",") for line in gpus.splitlines() if "," in line)}
    apps_query = ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"]
    apps = subprocess.run([str(NVIDIA_SMI), *apps_query], capture_output=True, text=True, env=state, timeout=30)
    rows = [[part.strip() for part in line.split(",")] for line in apps.stdout.splitlines() if "," in line]
    return [Holding(int(pid), index[uuid], int(mib)) for pid, uuid, mib in rows if uuid in index]


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                    found.append(int(entry))
    return found


def launch_pgids(workdir: Path) -> list[int]:
    """The process group of every launch of this host (from the run directories' pid files)."""
    pgids = []
    for pid_file in (workdir / "runs").glob("*/pid"):
        text = pid_file.read_text().strip()
        if text.isdigit() and int(text) > 1:
            pgids.append(int(text))
    return pgids


def reap(workdir: Path) -> list[int]:
    """SIGKILL every launch group of this host still alive; returns the groups that were (a test's failure)."""
    left = [g for g in launch_pgids(workdir) if group_members(g)]
    for pgid in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    return left


def sim_processes(workdir: Path, needle: str = "") -> dict[str, list[int]]:
    """Run id -> pids (main process first, then its ranks) of the simulated servers alive now whose argv has `needle`.

    A server's working directory is its run directory; its ranks are forked, so they share its argv.
    """
    found: dict[str, list[int]] = {}
    runs = str(workdir / "runs") + "/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{entry}/cwd")
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            sim = b"orchestrator.sim" in argv or b"sglang.launch_server" in argv  # a simulated install runs it so
            ours = cwd.startswith(runs) and sim and needle.encode() in b"\0".join(argv)
            if ours and alive(int(entry)):
                found.setdefault(cwd[len(runs) :].split("/")[0], []).append(int(entry))
    return {run: sorted(pids) for run, pids in found.items()}


def server_environs(workdir: Path) -> dict[str, dict[str, str]]:
    """Run id -> the environment its simulated server was started with, for each one alive now."""
    found = {}
    for run_id, pids in sim_processes(workdir).items():
        with contextlib.suppress(OSError):  # it may have ended since it was listed
            raw = Path(f"/proc/{pids[0]}/environ").read_bytes()
            pairs = (item.decode("utf-8", "surrogateescape").partition("=") for item in raw.split(b"\0") if item)
            found[run_id] = {name: value for name, _, value in pairs}
    return found


class Holder:
    """A foreign process holding simulated GPUs (orchestrator.sim.hold_gpu, or one that ignores SIGTERM)."""

    def __init__(self, workdir: Path, gpus: str, *, ignore_term: bool = False) -> None:
        env = {**os.environ, "ORCH_SIM_GPU_STATE": str(workdir / "gpu-state")}
        (workdir / "gpu-state").mkdir(parents=True, exist_ok=True)
        if ignore_term:
            indices = [int(g) for g in gpus.split(",")]
            code = (
                "import signal, sys, time\n"
                "from orchestrator.sim import gpu_state\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                f"gpu_state.hold(gpu_state.state_dir(), {dict.fromkeys(indices, 50000)!r}, name='stubborn')\n"
                "print('holding', flush=True)\n"
                "time.sleep(600)\n"
            )
            argv = [sys.executable, "-c", code]
        else:
            argv = [sys.executable, "-m", "orchestrator.sim.hold_gpu", "--gpus", gpus, "--seconds", "600"]
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "holding" in line, f"the GPU holder did not start: {line!r}"

    @property
    def pid(self) -> int:
        """The holder's pid (== its process group)."""
        return self.proc.pid

    def alive(self) -> bool:
        """Whether it still runs (it is our child: a dead one is reaped here)."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """End it and its group."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextlib.contextmanager
def holders() -> Iterator[list[Holder]]:
    """A list to put Holders in; every one is stopped at the end, whatever happened."""
    started: list[Holder] = []
    try:
        yield started
    finally:
        for holder in started:
            holder.stop()


def store_rows(db: Path) -> int:
    """Sweeps plus runs stored in `db` (0 when it does not exist)."""
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sweeps", "runs"))
