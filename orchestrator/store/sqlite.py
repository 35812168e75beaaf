"""Seam 3, the result store: one SQLite file holding sweeps, their cells and every run of a cell.

Every write commits before its method returns (autocommit, WAL, synchronous=FULL), so a kill -9 loses
nothing already written. A run's row is written *before* its launch and then only moves forward,
pending -> launched -> done (or -> abandoned when it never produced a result), which is what lets
`--resume` re-attach to or reap a launch instead of starting it twice. One connection serves all
threads behind a lock: cells packed onto one host write from their own threads.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from orchestrator.errors import StoreError
from orchestrator.model import Cell, ProbeOutcome, Verdict
from orchestrator.store.records import (
    UNFINISHED_STATES,
    PastRun,
    RunRecord,
    RunState,
    SweepRecord,
    SweepStatus,
    cell_from_row,
    cell_to_row,
)
from orchestrator.store.results import CellResult, aggregate
from orchestrator.store.schema import SCHEMA_VERSION, ensure_schema

REPRO_OF = "repro_of"
"""The settings key of a sweep `orchestrator repro` made: the run it reproduces."""


@contextmanager
def _mapped(what: str) -> Iterator[None]:
    """Translate sqlite3's exceptions into StoreError here, at the seam."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{what}: {exc}") from exc


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: value for d, value in zip(cursor.description, row, strict=True)}


def _insert_sql(table: str, row: Mapping[str, Any]) -> str:
    return f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(f':{c}' for c in row)})"


def _unwritable(path: Path) -> str | None:
    """Why the store cannot be written here (its folder or the file itself), or None when it can."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        # SQLite's WAL needs to create files beside the store, so the folder must be writable too.
        return f"its folder {folder} is read-only"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    return None


def _open_read_only(path: Path, why: str) -> sqlite3.Connection:
    """A read-only connection: `mode=ro` reads a WAL it can, `immutable=1` one whose folder is read-only."""
    uri = f"file:{quote(str(path.resolve()))}"
    last: sqlite3.Error | None = None
    for params in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(f"{uri}?{params}", uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            (version,) = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            last = exc
            continue
        if version > SCHEMA_VERSION:
            conn.close()
            raise StoreError(
                f"the store {path} was written by a newer orchestrator (schema {version}, this one reads "
                f"{SCHEMA_VERSION})"
            )
        conn.row_factory = _dict_row
        return conn
    raise StoreError(f"cannot read the store {path} ({why}): {last}")


class Store:
    """The SQLite result store; use as a context manager or call `close()`."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"no store at {self.path} (run a sweep first, or pass --db / set ORCHESTRATOR_DB)")
        self._lock = threading.RLock()
        self.read_only = False
        unwritable = _unwritable(self.path)
        if unwritable and create:
            raise StoreError(
                f"cannot write the store {self.path}: {unwritable} (fix: pass --db PATH or set ORCHESTRATOR_DB "
                "to a file on a writable filesystem)"
            )
        if unwritable:
            # Reading a night's results must work from a read-only copy (an archive, a read-only mount).
            self._conn = _open_read_only(self.path, unwritable)
            self.read_only = True
            return
        with _mapped(f"cannot open the store {self.path}"):
            self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._conn.execute("PRAGMA foreign_keys = ON")
                ensure_schema(self._conn)
                self._conn.row_factory = _dict_row
            except BaseException:
                self._conn.close()
                raise

    def close(self) -> None:
        """Close the connection (everything written is already committed)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _write(self, what: str, sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> int:
        with self._lock, _mapped(what):
            return self._conn.execute(sql, params).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock, _mapped("cannot read the store"):
            return self._conn.execute(sql, params).fetchall()

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock, _mapped(what):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _unique(self, table: str, key: str, ref: str | None, kind: str) -> dict[str, Any]:
        """The one row whose key is `ref`, or starts with it (with or without the `s-`/`r-` prefix)."""
        ref = (ref or "").strip()
        if not ref:
            raise StoreError(f"an empty {kind} id matches nothing")
        rows = self._rows(f"SELECT * FROM {table} WHERE {key} = ?", (ref,))
        if not rows:
            alt = f"{kind[0]}-{ref}"
            rows = self._rows(
                f"SELECT * FROM {table} WHERE substr({key}, 1, ?) = ? OR substr({key}, 1, ?) = ? ORDER BY {key}",
                (len(ref), ref, len(alt), alt),
            )
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise StoreError(f"no {kind} matches {ref!r} in {self.path}")
        shown = ", ".join(r[key] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
        raise StoreError(f"{kind} id {ref!r} is ambiguous: it matches {shown}")

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
        return SweepRecord.from_row(rows[0])

    def list_sweeps(self) -> list[SweepRecord]:
        """Every sweep, newest first."""
        rows = self._rows("SELECT * FROM sweeps ORDER BY started_at DESC, sweep_id DESC")
        return [SweepRecord.from_row(r) for r in rows]

    def latest_sweep(self) -> SweepRecord | None:
        """The most recently started sweep of a matrix, if any: a repro's one-cell sweep is never "the latest".

        After a night's sweep and a morning's `orchestrator repro RUN`, a bare `table`, `explain` or
        `report` must still show the night's sweep; the repro's own sweep is named by its id.
        """
        sweeps = self.list_sweeps()
        return next((r for r in sweeps if not r.settings.get(REPRO_OF)), sweeps[0] if sweeps else None)

    def resolve_sweep(self, ref: str | None) -> SweepRecord:
        """The sweep a user named: None means the latest; otherwise an id or a unique prefix of one."""
        if ref is None:
            latest = self.latest_sweep()
            if latest is None:
                raise StoreError(f"no sweeps in {self.path} yet")
            return latest
        return SweepRecord.from_row(self._unique("sweeps", "sweep_id", ref, "sweep"))

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
            cell = cell_from_row(
                {
                    "cell_id": row["cell_id"],
                    "flags": row["c_flags"],
                    "axes": row["c_axes"],
                    "env_names": row["c_env_names"],
                    "install": row["c_install"],
                }
            )
            versions, facts = json.loads(row["s_versions"]), json.loads(row["s_host_facts"])
            found.append(PastRun(cell, RunRecord.from_row(row), versions, facts))
        return found

    def get_cells(self, sweep_id: str) -> list[Cell]:
        """A sweep's cells in order; env holds variable names only, with masked values."""
        rows = self._rows("SELECT * FROM cells WHERE sweep_id = ? ORDER BY position", (sweep_id,))
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
        return RunRecord.from_row(rows[0])

    def get_run(self, ref: str) -> RunRecord:
        """The run with this id, or the one run whose id starts with it."""
        return RunRecord.from_row(self._unique("runs", "run_id", ref, "run"))

    def _sweep_runs(self, sweep_id: str, where: str = "", params: Sequence[Any] = ()) -> list[RunRecord]:
        rows = self._rows(
            "SELECT r.* FROM runs r JOIN cells c USING (sweep_id, cell_id)"
            f" WHERE r.sweep_id = ? {where} ORDER BY c.position, r.attempt",
            (sweep_id, *params),
        )
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
        return [aggregate(c, by_cell.get(c.cell_id, ()), retries_allowed) for c in self.get_cells(sweep_id)]
