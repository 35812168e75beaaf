"""Our side of the bench: sweeps run as users run them (`orchestrator sweep`, a child process), read back from
the store, and the huge-log harvest as the sweep calls it."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench_env import REPO, BenchEnv, listen_overflows

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import EvidenceBuilder
from orchestrator.harvest.fetch import harvest_huge
from orchestrator.harvest.needles import HOST_GREP_REGEX
from orchestrator.model import Verdict
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.transport import LocalTransport, Transport
from orchestrator.transport.ssh import SshTransport


@dataclass
class SweepRun:
    """One `orchestrator sweep` command: when it ran, what it printed, and its runs from the store."""

    started: float
    wall_s: float
    runs: list[RunRecord]
    preflight_s: float | None
    cpu_s: float
    """CPU time of the orchestrator's own process (user + system)."""
    overflows: int
    """Accept-queue overflows on this machine meanwhile (each costs a client a 1 s SYN retry)."""

    @property
    def launch_phase_s(self) -> float:
        """From the first launch's run row to the last verdict: the part of the sweep packing can shorten."""
        return max(r.ended_at or r.started_at for r in self.runs) - min(r.started_at for r in self.runs)

    def max_in_flight(self) -> int:
        """The most runs whose [start, end] intervals overlap at one instant."""
        edges = sorted([(r.started_at, 1) for r in self.runs] + [(r.ended_at or r.started_at, -1) for r in self.runs])
        most = now = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        return most

    def overlapping_pairs(self) -> list[tuple[RunRecord, RunRecord]]:
        """Every two runs that were in flight at the same time."""
        pairs = []
        for i, a in enumerate(self.runs):
            for b in self.runs[i + 1 :]:
                if a.started_at < (b.ended_at or 0) and b.started_at < (a.ended_at or 0):
                    pairs.append((a, b))
        return pairs


def cli_sweep(
    env: BenchEnv, name: str, matrix: Path, hosts: Path, *, serial: bool, exit_codes: tuple[int, ...] = (0,)
) -> SweepRun:
    """`orchestrator sweep MATRIX` in a child process, timed from its start to its exit (`exit_codes`: expected)."""
    db = env.root / name / "store.db"
    args = [sys.executable, "-m", "orchestrator", "sweep", str(matrix), "--hosts", str(hosts), "--host", "bench"]
    args += ["--db", str(db)] + (["--serial"] if serial else [])
    child_env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    overflows = listen_overflows()
    started = time.time()
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=child_env, cwd=REPO)
    wall = time.time() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode not in exit_codes:
        raise RuntimeError(f"orchestrator sweep {matrix.name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        runs = store.runs(sweep.sweep_id)
    found = re.search(r"preflight (\d+(?:\.\d+)?)s", done.stdout)
    preflight = float(found.group(1)) if found else None
    return SweepRun(started, wall, runs, preflight, cpu, listen_overflows() - overflows)


def died_at(run: RunRecord) -> float | None:
    """When the launch's server exited by itself (the launch wrapper writes `exit_code` right then)."""
    path = Path(run.run_dir or "/nonexistent") / "exit_code"
    return path.stat().st_mtime if path.exists() else None


def connect(env: BenchEnv) -> Transport:
    """A transport to the simulated host, as a sweep's session opens it."""
    target = env.target()
    return SshTransport(target) if target is not None else LocalTransport()


def ssh_round_trips(env: BenchEnv, tries: int = 5) -> tuple[float, float]:
    """(a new connection's first command, the median of `tries` commands on the open connection), seconds."""
    transport = connect(env)
    try:
        began = time.perf_counter()
        transport.run("true")
        opened = time.perf_counter() - began
        again = []
        for _ in range(tries):
            began = time.perf_counter()
            transport.run("true")
            again.append(time.perf_counter() - began)
    finally:
        transport.close()
    return opened, sorted(again)[len(again) // 2]


def harvest(transport: Transport, log: Path) -> tuple[float, int, Verdict]:
    """Harvest a huge log the way the sweep's final harvest does and classify it: (seconds, bytes moved, verdict)."""
    started = time.perf_counter()
    harvested = harvest_huge(transport, str(log), HOST_GREP_REGEX)
    builder = EvidenceBuilder()
    for line, number in zip(harvested.lines, harvested.line_numbers, strict=True):
        builder.feed_line(line, number)
    verdict = classify(builder.finish())
    return time.perf_counter() - started, harvested.bytes_moved, verdict
