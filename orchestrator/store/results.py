"""A cell's finished runs summed up into one row of the pass/fail table.

Rules (pure, so the table, the JSON contract and `--resume` agree):
- A run that ended `infra` (the host or the orchestrator failed: SSH lost, a full disk, a port another process
  took) proves nothing about the flags. The row rests on the runs that do (`pass`, `fail`, `invalid`): their
  latest verdict is shown even when an infra run came after it, so a proven failure (or pass) is never hidden by a
  retry the host spoiled. A cell whose only finished runs are infra is `infra`, and the row rests on those.
- attempts read `k/N`: k runs passed out of the N finished runs the row rests on. Infra runs after a proof are not
  in N: they would dilute a flaky cell's pass rate with the host's failures (pass, fail, infra is 1 of 2, not 1 of
  3); `infra_runs` counts every finished infra run, so none is hidden. Abandoned runs produced no result and never
  count; nor does a skipped run once the cell has run.
- The cell's status is the shown run's, unless both a pass and a fail occur among its runs: then the cell
  is `fail` and `flaky`, and the row shows the latest failing run, so `repro` of its `run_id` replays the
  failure the row names. Deterministic failures keep `flaky` false.
- On a pool of hosts, a cell whose runs pass on one host and fail on another, each host agreeing with itself,
  is not flaky: it is `fail` with `passes_on`/`fails_on` naming the hosts (the row shows the failing run).
- Whether a cell needs (another) run, and the sentence saying why it was or was not retried, come from
  retries.decide_after over every finished run in order, infra ones included: the rule the scheduler applies after
  each attempt and `--resume` applies to the store (sweep/recover.py `jobs_left`), so a resumed sweep and an
  uninterrupted one give the same table. There an infra run counts against the retries of its class (`transient`:
  a failing host gets that many launches, no more), except a port race, which is relaunched on another port
  without using up the cell's retries. A cell with no finished run (or only a skipped one) needs a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.model import Category, Cell, Phase, Status, Verdict
from orchestrator.retries import retries_owed, retry_reason
from orchestrator.settings import RetryPolicy
from orchestrator.store.records import UNFINISHED_STATES, RunRecord, SweepKind, SweepRecord


@dataclass(frozen=True, kw_only=True)
class CellResult:
    """One cell and its runs in one sweep, aggregated for the table."""

    cell: Cell
    runs: tuple[RunRecord, ...]
    """The finished runs the row rests on, by attempt: those that were not infra, or the infra ones if none."""
    status: Status | None
    """None while no run of the cell has finished."""
    phase: Phase | None = None
    category: Category | None = None
    root_cause_line: str | None = None
    reason: str = ""
    passes: int = 0
    ready_s: float | None = None
    run_id: str | None = None
    """The run whose verdict the row shows."""
    flaky: bool = False
    job_id: str | None = None
    """The Slurm job of the shown run (Slurm hosts only)."""
    pending_s: float | None = None
    """Seconds the shown run's job waited in the batch queue (not counted in `ready_s`)."""
    unfinished_run_id: str | None = None
    """A run written but not finished (pending or launched): in flight, or cut off by an interruption."""
    needs_run: bool = True
    speed: dict[str, Any] | None = None
    """A passing cell's speed under the standard load, from the shown run (probe/speed.py); None: not measured."""
    host: str | None = None
    """The host of the run the row shows."""
    hosts: tuple[str, ...] = ()
    """Every host the cell's finished runs ran on, in order."""
    passes_on: tuple[str, ...] = ()
    fails_on: tuple[str, ...] = ()
    """Set when the outcome depends on the host: it passed on these and failed on those, every time."""
    drift: dict[str, dict[str, str]] = field(default_factory=dict)
    """Flags the shown run's server ran with another value than asked: flag -> {asked, used, evidence}."""
    retry_reason: str = ""
    """Why the cell was or was not tried again (its failure's class and the retry policy)."""
    infra_runs: int = 0
    """Finished runs that ended infra (the host's or the orchestrator's failure), counted in `runs` only when the
    cell has no other finished run."""

    @property
    def attempts(self) -> int:
        """Finished runs the row rests on (see `runs`)."""
        return len(self.runs)

    @property
    def attempts_text(self) -> str:
        """`k/N`: passes out of finished runs."""
        return f"{self.passes}/{self.attempts}"

    def to_dict(self) -> dict[str, Any]:
        """One entry of the JSON contract's `cells` list (extra keys after the contract's)."""
        return {
            "cell_id": self.cell.cell_id,
            "run_id": self.run_id,
            "flags": {name.lstrip("-"): value for name, value in self.cell.flags.items()},
            "status": None if self.status is None else self.status.value,
            "phase": None if self.phase is None else self.phase.value,
            "category": None if self.category is None else self.category.value,
            "root_cause_line": self.root_cause_line,
            "attempts": self.attempts_text,
            "ready_s": self.ready_s,
            "label": self.cell.label,
            "axes": list(self.cell.axes),
            "install": self.cell.install,
            "passes": self.passes,
            "runs": self.attempts,
            "flaky": self.flaky,
            "reason": self.reason,
            "host": self.host,
            "hosts": list(self.hosts),
            "passes_on": list(self.passes_on),
            "fails_on": list(self.fails_on),
            "job_id": self.job_id,
            "pending_s": self.pending_s,
            "speed": self.speed,
            "drift": dict(self.drift),
            "retry_reason": self.retry_reason,
            "infra_runs": self.infra_runs,
        }


def aggregate(
    cell: Cell, runs: Iterable[RunRecord], retries_allowed: int = 0, policy: RetryPolicy | None = None
) -> CellResult:
    """Sum up one cell's runs (any states, any order) by the rules in this module's docstring.

    `policy`: the sweep's retries by failure class (the default: `retries_allowed` for every class).
    """
    mine = sorted((r for r in runs if r.cell_id == cell.cell_id), key=lambda r: r.attempt)
    finished = [(r, r.verdict) for r in mine if r.state == "done" and r.verdict is not None]
    # A cell skipped by a stopped sweep and run on its resume: only the runs that ran count.
    ran = [d for d in finished if d[1].status is not Status.SKIPPED]
    done = ran or finished[-1:]
    unfinished = next((r.run_id for r in reversed(mine) if r.state in UNFINISHED_STATES), None)
    if not done:
        return CellResult(cell=cell, runs=(), status=None, unfinished_run_id=unfinished)
    infra = [d for d in done if d[1].status is Status.INFRA]
    counted = [d for d in done if d[1].status is not Status.INFRA] or done
    statuses = [v.status for _, v in counted]
    mixed = Status.PASS in statuses and Status.FAIL in statuses
    passes_on, fails_on = _host_split(counted) if mixed else ((), ())
    flaky = mixed and not passes_on
    shown, verdict = next(d for d in reversed(counted) if d[1].status is Status.FAIL) if mixed else counted[-1]
    history = [v for _, v in ran]
    policy = policy or RetryPolicy()
    return CellResult(
        cell=cell,
        runs=tuple(r for r, _ in counted),
        status=row_status([v.status for _, v in done]),
        phase=verdict.phase,
        category=verdict.category,
        root_cause_line=verdict.root_cause_line,
        reason=verdict.reason,
        passes=statuses.count(Status.PASS),
        ready_s=shown.ready_s,
        run_id=shown.run_id,
        job_id=shown.job_id,
        pending_s=shown.pending_s,
        flaky=flaky,
        speed=_speed_of(shown) if not flaky and verdict.status is Status.PASS else None,
        unfinished_run_id=unfinished,
        needs_run=retries_owed(history, policy, retries_allowed),
        host=shown.host,
        hosts=tuple(dict.fromkeys(r.host for r, _ in counted)),
        passes_on=passes_on,
        fails_on=fails_on,
        drift=dict(shown.outcome.drift) if shown.outcome is not None else {},
        retry_reason=retry_reason(history, policy, retries_allowed),
        infra_runs=len(infra),
    )


def row_status(statuses: Sequence[Status]) -> Status:
    """The row's status from its finished attempts' statuses, in order (the rules above; not empty): the live
    progress counts cells by it too, so its counts are the table's."""
    proving: list[Status] = [s for s in statuses if s is not Status.INFRA]
    counted = proving or list(statuses)
    if Status.PASS in counted and Status.FAIL in counted:
        return Status.FAIL  # flaky, or passing on one host and failing on another: the failure is the row's
    return counted[-1]


def _speed_of(run: RunRecord) -> dict[str, Any] | None:
    return None if run.outcome is None else run.outcome.speed


def _host_split(done: list[tuple[RunRecord, Verdict]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(hosts it passed on, hosts it failed on) when each host's runs agree; else ((), ()), which is flaky."""
    by_host: dict[str, set[Status]] = {}
    for run, verdict in done:
        if verdict.status in (Status.PASS, Status.FAIL):
            by_host.setdefault(run.host, set()).add(verdict.status)
    if any(len(seen) > 1 for seen in by_host.values()):
        return (), ()
    passes = tuple(h for h, seen in by_host.items() if Status.PASS in seen)
    fails = tuple(h for h, seen in by_host.items() if Status.FAIL in seen)
    return (passes, fails) if passes and fails else ((), ())


@dataclass(frozen=True, kw_only=True)
class SweepSummary:
    """One sweep of the store as `orchestrator sweeps` lists it: what ran, where, and how it went."""

    sweep: SweepRecord
    kind: SweepKind
    launched: int
    """Runs that reached the host (a sweep whose cells were all invalid launched none)."""
    counts: dict[str, int]
    """Cells by status (`pass`, `fail`, ..., and `not run`), from the table's rules."""
    latest: bool = False
    """The sweep a bare `table`, `explain` or `report` shows."""

    @property
    def cells(self) -> int:
        """Cells of the sweep."""
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        """One entry of `orchestrator sweeps --format json`."""
        record = self.sweep
        return {
            "sweep_id": record.sweep_id,
            "name": record.name,
            "host": record.host,
            "matrix_path": record.matrix_path,
            "started_at": record.started_at,
            "ended_at": record.ended_at,
            "status": record.status,
            "kind": self.kind,
            "cells": self.cells,
            "launched": self.launched,
            "pass": self.counts.get(Status.PASS.value, 0),
            "fail": self.counts.get(Status.FAIL.value, 0),
            "counts": dict(self.counts),
            "latest": self.latest,
            "sglang": record.versions.get("sglang"),
        }


def status_counts(results: Iterable[CellResult]) -> dict[str, int]:
    """Cells by status value, `not run` for cells with no finished run; statuses in their enum order."""
    found = [r.status.value if r.status is not None else "not run" for r in results]
    order = [*(s.value for s in Status), "not run"]
    return {name: found.count(name) for name in order if name in found}
