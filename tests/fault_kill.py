"""`kill -9` of the orchestrator at a seeded random moment of a sweep, then `--resume`: one kill point, measured.

Shared by tests/e2e/test_faults_resume.py (a few points) and scripts/kill_resume (all twenty). Each point
gets a host of its own (workdir, store, GPU state), so points never see each other's processes.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fault_harness import EXPECTED, HANG_CELL, HANG_LABEL, HANG_ROW, FaultHost, Row
from tests.sshd_host import SshdHost

SWEEP_TIMEOUT_S = 120.0
KILL_DEADLINES = {"model_load": "2s", "ready": "20s", "probe": "10s", "stop_grace": "2s"}
"""The hanging cell is cut after 2 s at model_load: long enough to be killed and resumed in the middle of."""


def expected_table() -> dict[str, Row]:
    """What the kill matrix (MATRIX plus the hanging two-GPU cell) comes to, uninterrupted."""
    table = {f"{label}, tp-size=1": row for label, row in EXPECTED.items()}
    return table | {HANG_LABEL: HANG_ROW}


def kill_host(root: Path, sshd: SshdHost | None = None) -> FaultHost:
    """A host for kill points: the five-cell matrix, short deadlines."""
    fh = FaultHost(root, sshd=sshd, deadlines=dict(KILL_DEADLINES))
    fh.write_matrix(cells=HANG_CELL)
    return fh


@dataclass
class Baseline:
    """An uninterrupted sweep: its table, and how long it ran after its record appeared (where kills land)."""

    table: dict[str, Row]
    span_s: float


@dataclass
class KillPoint:
    """What one kill and its resume came to."""

    seed: int
    kill_at_s: float
    """Seconds after the sweep's record appeared in the store."""
    in_flight: dict[str, int] = field(default_factory=dict)
    """Run states in the store at the kill."""
    resume_rc: int = -1
    resume_output: str = ""
    table: dict[str, Row] = field(default_factory=dict)
    equal: bool = False
    leftovers: list[str] = field(default_factory=list)
    """Our processes still alive, and GPUs the fake nvidia-smi still shows held, after the resume."""
    unrecorded: list[str] = field(default_factory=list)
    """Launches the host saw that the store has no run for (a launch nobody will ever stop or count)."""

    @property
    def ok(self) -> bool:
        """Resumed cleanly to the uninterrupted table, nothing left behind, every launch on record."""
        return self.resume_rc == 0 and self.equal and not self.leftovers and not self.unrecorded

    def line(self) -> str:
        """One line for the report: kill time, resume result, equal or not, leftovers."""
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.in_flight.items())) or "no runs yet"
        return (
            f"seed {self.seed:>3}  kill at {self.kill_at_s:5.2f}s ({states})  resume rc={self.resume_rc}  "
            f"table {'equal' if self.equal else 'DIFFERENT'}  leftovers {len(self.leftovers)}  "
            f"unrecorded launches {len(self.unrecorded)}"
        )


def sweep_record(db: Path) -> tuple[str, dict[str, int]] | None:
    """The sweep id in a store and its runs by state, or None before the sweep is recorded."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT sweep_id FROM sweeps").fetchone()
            states = dict(conn.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())
    except sqlite3.Error:
        return None
    return (str(row[0]), {str(k): int(v) for k, v in states.items()}) if row else None


def _wait_recorded(fh: FaultHost, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while sweep_record(fh.db) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no sweep recorded in {fh.db} after {timeout}s")
        time.sleep(0.02)
    return time.monotonic()


def uninterrupted(fh: FaultHost) -> Baseline:
    """Run the sweep through without a kill; its table and its span after being recorded."""
    proc = fh.spawn("sweep", output=fh.root / "sweep.out")
    try:
        recorded = _wait_recorded(fh, SWEEP_TIMEOUT_S)
        proc.wait(timeout=SWEEP_TIMEOUT_S)
        span = time.monotonic() - recorded
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, (fh.root / "sweep.out").read_text()
    return Baseline(fh.table(), span)


def kill_and_resume(fh: FaultHost, seed: int, baseline: Baseline) -> KillPoint:
    """Start the sweep, SIGKILL the orchestrator at a seeded moment of its span, resume it, compare, look around."""
    kill_at = random.Random(seed).uniform(0.0, baseline.span_s)
    proc = fh.spawn("sweep", output=fh.root / "sweep.out")
    try:
        recorded = _wait_recorded(fh, SWEEP_TIMEOUT_S)
        time.sleep(max(0.0, recorded + kill_at - time.monotonic()))
        os.kill(proc.pid, signal.SIGKILL)  # the orchestrator only: its launches live on, as after a crash
    finally:
        proc.kill()
        proc.wait()
    found = sweep_record(fh.db)
    assert found is not None
    sweep_id, states = found
    point = KillPoint(seed, kill_at, states)
    resumed = fh.cli("sweep", "--resume", sweep_id, timeout=SWEEP_TIMEOUT_S)
    point.resume_rc = resumed.returncode
    point.resume_output = resumed.stdout + resumed.stderr
    point.table = fh.table(sweep_id)
    point.equal = point.table == baseline.table
    point.leftovers = fh.leftovers() + [f"GPU held: {h}" for h in fh.gpu_holders()]
    point.unrecorded = unrecorded_launches(fh, sweep_id)
    return point


def unrecorded_launches(fh: FaultHost, sweep_id: str) -> list[str]:
    """Run dirs with no run in the store, and sim launches beyond the pid files (each pid file is one launch)."""
    with sqlite3.connect(f"file:{fh.db}?mode=ro", uri=True) as conn:
        known = {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE sweep_id = ?", (sweep_id,))}
    runs = fh.workdir / "runs"
    strays = [d.name for d in sorted(runs.glob("r-*")) if d.name not in known] if runs.is_dir() else []
    counts = fh.launch_counts()
    if counts["sim_launches"] != counts["pid_files"]:
        strays.append(f"{counts['sim_launches']} sim launches but {counts['pid_files']} pid files")
    return strays
