"""Seam 3, the result store: one SQLite file holding sweeps, their cells and every run of a cell.

Every write commits before its method returns (autocommit, WAL, synchronous=FULL), so a kill -9 loses
nothing already written. A run's row is written *before* its launch and then only moves forward,
pending -> launched -> done (or -> abandoned when it never produced a result), which is what lets
`--resume` re-attach to or reap a launch instead of starting it twice. One connection serves all
threads behind a lock: cells packed onto one host write from their own threads.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.model import Cell, ProbeOutcome, Verdict
from orchestrator.settings import RetryPolicy
from orchestrator.store.records import (
    REPRO_OF,
    UNFINISHED_STATES,
    PastRun,
    RunRecord,
    RunState,
    SweepRecord,
    SweepStatus,
    cell_from_row,
    cell_to_row,
    sweep_kind,
)
from orchestrator.store.results import CellResult, SweepSummary, aggregate, status_counts
from orchestrator.store.schema import StoreFile

__all__ = ["REPRO_OF", "Store"]

_LAUNCHED = "SELECT DISTINCT sweep_id FROM runs WHERE run_dir IS NOT NULL OR state = 'launched'"
"""Sweeps with a run that reached the host (a launched run has its run directory)."""


def _insert_sql(table: str, row: Mapping[str, Any]) -> str:
    return f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(f':{c}' for c in row)})"


class Store(StoreFile):
    """The SQLite result store; use as a context manager or call `close()`."""

    # Sweeps

    def create_sweep(self, record: SweepRecord) -> None:
        """Record a new sweep."""
        row = record.to_row()
        self._write(f"cannot create sweep {record.sweep_id}", _insert_sql("sweeps", row), row)

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        """The sweep with exactly this id."""
        rows = self._rows("SELECT * FROM sweeps WHERE sweep_id = ?", (sweep_id,))
        if not rows:
            raise StoreError(f"no sweep {sweep_id!r} in {self.path}")
        with self._reading():
            return SweepRecord.from_row(rows[0])

    def list_sweeps(self) -> list[SweepRecord]:
        """Every sweep, newest first."""
        rows = self._rows("SELECT * FROM sweeps ORDER BY started_at DESC, sweep_id DESC")
        with self._reading():
            return [SweepRecord.from_row(r) for r in rows]

    def _launched_sweeps(self) -> set[str]:
        return {r["sweep_id"] for r in self._rows(_LAUNCHED)}

    def latest_sweep(self) -> SweepRecord | None:
        """The night's sweep: the newest sweep of a matrix that launched something, if any.

        A one-cell `orchestrator run`, a repro's sweep and a sweep whose cells were all invalid are never
        "the latest": after a night's sweep and a morning of those, a bare `table`, `explain` or `report` still
        shows the night; the others are named by their ids (`orchestrator sweeps` lists them). In a store that
        holds none such, the newest sweep is the latest.
        """
        sweeps = self.list_sweeps()
        launched = self._launched_sweeps()
        night = (r for r in sweeps if sweep_kind(r) == "sweep" and r.sweep_id in launched)
        return next(night, sweeps[0] if sweeps else None)

    def latest_like(self, record: SweepRecord) -> SweepRecord | None:
        """The newest other sweep of the same matrix (by name) on the same host that launched something."""
        launched = self._launched_sweeps()
        return next(
            (
                r
                for r in self.list_sweeps()
                if r.sweep_id != record.sweep_id
                and r.sweep_id in launched
                and sweep_kind(r) == "sweep"
                and (r.name, r.host) == (record.name, record.host)
            ),
            None,
        )

    def sweep_summaries(self) -> list[SweepSummary]:
        """Every sweep, newest first, with its kind, launches and cells by status (`orchestrator sweeps`)."""
        latest = self.latest_sweep()
        rows = self._rows("SELECT sweep_id, count(*) AS n FROM runs WHERE run_dir IS NOT NULL GROUP BY sweep_id")
        launched = {r["sweep_id"]: int(r["n"]) for r in rows}
        return [
            SweepSummary(
                sweep=record,
                kind=sweep_kind(record),
                launched=launched.get(record.sweep_id, 0),
                counts=status_counts(self.cell_results(record.sweep_id, int(record.settings.get("retries", 0)))),
                latest=latest is not None and record.sweep_id == latest.sweep_id,
            )
            for record in self.list_sweeps()
        ]

    def resolve_sweep(self, ref: str | None) -> SweepRecord:
        """The sweep a user named: None means the latest; otherwise an id or a unique prefix of one."""
        if ref is None:
            latest = self.latest_sweep()
            if latest is None:
                raise StoreError(f"no sweeps in {self.path} yet")
            return latest
        row = self._unique("sweeps", "sweep_id", ref, "sweep")
        with self._reading():
            return SweepRecord.from_row(row)

    def _update_sweep(self, sweep_id: str, what: str, changes: dict[str, Any]) -> None:
        with self._lock:
            row = replace(self.get_sweep(sweep_id), **changes).to_row()
            cols = ", ".join(f"{c} = :{c}" for c in changes)
            self._write(f"cannot {what} sweep {sweep_id}", f"UPDATE sweeps SET {cols} WHERE sweep_id = :sweep_id", row)

    def finish_sweep(self, sweep_id: str, status: SweepStatus, ended_at: float | None = None) -> None:
        """Mark a sweep done or interrupted."""
        ended = time.time() if ended_at is None else ended_at
        self._update_sweep(sweep_id, "finish", {"status": status, "ended_at": ended})

    def reopen_sweep(self, sweep_id: str) -> None:
        """Mark a sweep running again (`--resume`)."""
        self._update_sweep(sweep_id, "reopen", {"status": "running", "ended_at": None})

    def update_sweep_settings(self, sweep_id: str, changes: Mapping[str, Any]) -> None:
        """Merge `changes` into a sweep's stored settings (its plan grew, or a resume changed the strategy)."""
        with self._lock:
            settings = {**self.get_sweep(sweep_id).settings, **changes}
            self._update_sweep(sweep_id, "update", {"settings": settings})

    def update_sweep_facts(self, sweep_id: str, host_facts: dict[str, Any], versions: dict[str, Any]) -> None:
        """Replace the host facts and versions recorded for a sweep (known only after preflight)."""
        self._update_sweep(sweep_id, "update", {"host_facts": host_facts, "versions": versions})

    # Cells

    def save_cells(self, sweep_id: str, cells: Sequence[Cell], origin: str | None = None) -> None:
        """Record a sweep's cells in order; saving the same cells again is a no-op (resume)."""
        ids = [c.cell_id for c in cells]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise StoreError(f"sweep {sweep_id}: duplicate cell ids {', '.join(dupes)}")
        with self._transaction(f"cannot save the cells of sweep {sweep_id}") as conn:
            query = "SELECT cell_id FROM cells WHERE sweep_id = ? ORDER BY position"
            saved = [r["cell_id"] for r in conn.execute(query, (sweep_id,))]
            if saved:
                if saved != ids:
                    raise StoreError(f"sweep {sweep_id} already has different cells ({len(saved)} saved)")
                return
            for position, cell in enumerate(cells):
                row = cell_to_row(sweep_id, position, cell, origin)
                conn.execute(_insert_sql("cells", row), row)

    def add_cells(self, sweep_id: str, cells: Sequence[Cell], origin: str) -> list[Cell]:
        """Append cells to a sweep as its plan grows (adaptive, or a fuller resume); returns those not there yet.

        Cells the sweep already has are left as they are, so adding the same cells twice is a no-op.
        """
        with self._transaction(f"cannot add cells to sweep {sweep_id}") as conn:
            query = "SELECT cell_id, position FROM cells WHERE sweep_id = ?"
            saved = {r["cell_id"]: r["position"] for r in conn.execute(query, (sweep_id,))}
            position = max(saved.values(), default=-1) + 1
            added: list[Cell] = []
            for cell in cells:
                if cell.cell_id in saved:
                    continue
                row = cell_to_row(sweep_id, position, cell, origin)
                conn.execute(_insert_sql("cells", row), row)
                saved[cell.cell_id] = position
                position += 1
                added.append(cell)
            return added

    def cell_origins(self, sweep_id: str) -> dict[str, str | None]:
        """Cell id -> the step of the plan that added it (None in stores from before origins were kept)."""
        rows = self._rows("SELECT cell_id, origin FROM cells WHERE sweep_id = ? ORDER BY position", (sweep_id,))
        return {r["cell_id"]: r["origin"] for r in rows}

    def host_history(self, host: str, cell_ids: Sequence[str] = ()) -> list[PastRun]:
        """Finished runs on `host` in every sweep (of `cell_ids` when given), oldest first, each with its cell
        and its sweep's versions and host facts (what says whether an old verdict still holds)."""
        where, params = "", [host]
        if cell_ids:
            marks = ", ".join("?" * len(cell_ids))
            where = f" AND r.cell_id IN ({marks})"
            params += list(cell_ids)
        rows = self._rows(
            "SELECT r.*, c.flags AS c_flags, c.axes AS c_axes, c.env_names AS c_env_names, c.install AS c_install,"
            " s.versions AS s_versions, s.host_facts AS s_host_facts"
            " FROM runs r JOIN cells c USING (sweep_id, cell_id) JOIN sweeps s USING (sweep_id)"
            f" WHERE s.host = ? AND r.state = 'done'{where} ORDER BY r.ended_at, r.started_at",
            params,
        )
        found = []
        for row in rows:
            with self._reading():
                found.append(PastRun.from_row(row))
        return found

    def get_cells(self, sweep_id: str) -> list[Cell]:
        """A sweep's cells in order; env holds variable names only, with masked values."""
        rows = self._rows("SELECT * FROM cells WHERE sweep_id = ? ORDER BY position", (sweep_id,))
        with self._reading():
            return [cell_from_row(r) for r in rows]

    # Runs

    def next_attempt(self, sweep_id: str, cell_id: str) -> int:
        """The attempt number the cell's next run in this sweep takes."""
        query = "SELECT coalesce(max(attempt), 0) AS last FROM runs WHERE sweep_id = ? AND cell_id = ?"
        return int(self._rows(query, (sweep_id, cell_id))[0]["last"]) + 1

    def create_run(self, record: RunRecord) -> None:
        """Record a run before it is launched (state pending)."""
        if record.state != "pending":
            raise StoreError(f"run {record.run_id}: a new run must be pending, not {record.state}")
        row = record.to_row()
        self._write(f"cannot create run {record.run_id}", _insert_sql("runs", row), row)

    def _advance(self, run_id: str, allowed: tuple[RunState, ...], changes: dict[str, Any]) -> RunRecord:
        """Move a run forward in its lifecycle; refuse to go back or to finish it twice."""
        with self._lock:
            current = self._run_exact(run_id)
            if current.state not in allowed:
                raise StoreError(f"run {run_id} is {current.state}, expected {' or '.join(allowed)}")
            row = replace(current, **changes).to_row()
            cols = ", ".join(f"{c} = :{c}" for c in row if c != "run_id")
            self._write(f"cannot update run {run_id}", f"UPDATE runs SET {cols} WHERE run_id = :run_id", row)
            return RunRecord.from_row(row)

    def mark_launched(
        self,
        run_id: str,
        run_dir: str,
        pgid: int | None,
        port: int | None,
        gpus: Sequence[int],
        job_id: str | None = None,
    ) -> RunRecord:
        """Record where and how a pending run was started (a batch job: its job id)."""
        changes = {"state": "launched", "run_dir": run_dir, "pgid": pgid, "port": port, "gpus": tuple(gpus)}
        if job_id is not None:
            changes["job_id"] = job_id
        return self._advance(run_id, ("pending",), changes)

    def set_placement(self, run_id: str, node: str | None, port: int | None, gpus: Sequence[int]) -> RunRecord:
        """Record where a launched run's batch job ran (known only once it runs)."""
        return self._advance(run_id, ("launched",), {"node": node, "port": port, "gpus": tuple(gpus)})

    def finish_run(
        self,
        run_id: str,
        outcome: ProbeOutcome | None,
        evidence: dict[str, Any] | None,
        verdict: Verdict,
        timings: Mapping[str, float],
        ended_at: float | None = None,
    ) -> RunRecord:
        """Record a run's result; a run is finished exactly once."""
        changes = {
            "state": "done",
            "outcome": outcome,
            "evidence": evidence,
            "verdict": verdict,
            "timings": dict(timings),
            "ended_at": time.time() if ended_at is None else ended_at,
        }
        return self._advance(run_id, UNFINISHED_STATES, changes)

    def revise_verdict(self, run_id: str, verdict: Verdict) -> RunRecord:
        """Replace a finished run's verdict after a later look across the sweep (answers that disagree).

        The previous verdict goes with the new one's evidence; outcome, evidence and timings stay as recorded.
        """
        return self._advance(run_id, ("done",), {"verdict": verdict})

    def discard_run(self, run_id: str, ended_at: float | None = None) -> RunRecord:
        """Mark an unfinished run abandoned: it stays in the history but never counts as an attempt."""
        changes = {"state": "abandoned", "ended_at": time.time() if ended_at is None else ended_at}
        return self._advance(run_id, UNFINISHED_STATES, changes)

    def _run_exact(self, run_id: str) -> RunRecord:
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise StoreError(f"no run {run_id!r} in {self.path}")
        with self._reading():
            return RunRecord.from_row(rows[0])

    def get_run(self, ref: str) -> RunRecord:
        """The run with this id, or the one run whose id starts with it.

        `SWEEP:CELL` (each an id or a unique prefix) names the run the sweep's table shows for that cell.
        """
        if ":" in ref:
            return self._run_of_cell(*ref.split(":", 1))
        row = self._unique("runs", "run_id", ref, "run")
        with self._reading():
            return RunRecord.from_row(row)

    def _run_of_cell(self, sweep_ref: str, cell_ref: str) -> RunRecord:
        sweep = self.resolve_sweep(sweep_ref)
        cell_ref = cell_ref.strip()
        results = self.cell_results(sweep.sweep_id, int(sweep.settings.get("retries", 0)))
        matches = [r for r in results if r.cell.cell_id.startswith(cell_ref)] if cell_ref else []
        if len(matches) != 1:
            how = "matches none" if not matches else f"is ambiguous ({', '.join(r.cell.cell_id for r in matches[:5])})"
            raise StoreError(
                f"cell {cell_ref!r} {how} of sweep {sweep.sweep_id}'s {len(results)} cells in {self.path} (fix: "
                f"`orchestrator table {sweep.sweep_id} -f csv` lists each cell_id and run_id)"
            )
        result = matches[0]
        run_id = result.run_id or result.unfinished_run_id
        if run_id is None:
            raise StoreError(f"cell {result.cell.cell_id} of sweep {sweep.sweep_id} has not run yet")
        return self._run_exact(run_id)

    def _sweep_runs(self, sweep_id: str, where: str = "", params: Sequence[Any] = ()) -> list[RunRecord]:
        rows = self._rows(
            "SELECT r.* FROM runs r JOIN cells c USING (sweep_id, cell_id)"
            f" WHERE r.sweep_id = ? {where} ORDER BY c.position, r.attempt",
            (sweep_id, *params),
        )
        with self._reading():
            return [RunRecord.from_row(r) for r in rows]

    def runs(self, sweep_id: str) -> list[RunRecord]:
        """Every run of a sweep, abandoned ones included, in cell order then attempt order."""
        return self._sweep_runs(sweep_id)

    def unfinished_runs(self, sweep_id: str) -> list[RunRecord]:
        """Runs written but not finished (pending or launched): what `--resume` must re-attach to or reap."""
        return self._sweep_runs(sweep_id, "AND r.state IN (?, ?)", UNFINISHED_STATES)

    def cell_results(self, sweep_id: str, retries_allowed: int = 0) -> list[CellResult]:
        """Each cell of a sweep with its runs aggregated (see store/results.py), in cell order."""
        by_cell: dict[str, list[RunRecord]] = {}
        for run in self.runs(sweep_id):
            by_cell.setdefault(run.cell_id, []).append(run)
        settings = self.get_sweep(sweep_id).settings
        stored = settings.get("retry")
        given: dict[str, Any] = stored if isinstance(stored, dict) else {}
        policy = RetryPolicy(**{k: v for k, v in given.items() if k in ("deterministic", "transient", "flaky")})
        return [
            aggregate(c, by_cell.get(c.cell_id, ()), retries_allowed, policy) for c in self.get_cells(sweep_id)
        ]
