"""The store's file: its SQLite schema and version, how it is opened (read-only where it cannot be written),
and how rows go in and out under one lock. Dict-valued columns hold JSON text (see records.py).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

from orchestrator.errors import StoreError
from orchestrator.store.records import DamagedRecord

_Self = TypeVar("_Self", bound="StoreFile")

SCHEMA_VERSION = 4
"""1: the first release. 2: cells.origin (which step of the plan added a cell), runs by cell (past verdicts).
3: cells.host (the pool lane of a cell when the host is an axis). 4: runs.job_id and runs.node (a batch
scheduler's job and the node it ran on)."""

_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id    TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    host        TEXT NOT NULL,
    matrix_yaml TEXT NOT NULL,
    matrix_path TEXT,
    started_at  REAL NOT NULL,
    ended_at    REAL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted')),
    host_facts  TEXT NOT NULL,
    versions    TEXT NOT NULL,
    settings    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cells (
    sweep_id  TEXT NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    position  INTEGER NOT NULL,
    cell_id   TEXT NOT NULL,
    flags     TEXT NOT NULL,
    axes      TEXT NOT NULL,
    env_names TEXT NOT NULL,
    install   TEXT,
    origin    TEXT,
    host      TEXT,
    PRIMARY KEY (sweep_id, cell_id),
    UNIQUE (sweep_id, position)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id     TEXT PRIMARY KEY,
    sweep_id   TEXT NOT NULL,
    cell_id    TEXT NOT NULL,
    attempt    INTEGER NOT NULL CHECK (attempt >= 1),
    state      TEXT NOT NULL CHECK (state IN ('pending', 'launched', 'done', 'abandoned')),
    host       TEXT NOT NULL,
    run_dir    TEXT,
    pgid       INTEGER,
    port       INTEGER,
    gpus       TEXT NOT NULL,
    command    TEXT NOT NULL,
    env_masked TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at   REAL,
    timings    TEXT NOT NULL,
    outcome    TEXT,
    evidence   TEXT,
    verdict    TEXT,
    install    TEXT,
    job_id     TEXT,
    node       TEXT,
    FOREIGN KEY (sweep_id, cell_id) REFERENCES cells (sweep_id, cell_id) ON DELETE CASCADE,
    UNIQUE (sweep_id, cell_id, attempt)
);
CREATE INDEX IF NOT EXISTS runs_by_state ON runs (sweep_id, state);
CREATE INDEX IF NOT EXISTS runs_by_cell ON runs (cell_id, state);
"""


_MIGRATIONS: dict[int, tuple[tuple[str, str, str], ...]] = {
    2: (("cells", "origin", "TEXT"),),
    3: (("cells", "host", "TEXT"),),
    4: (("runs", "job_id", "TEXT"), ("runs", "node", "TEXT")),
}
"""Version -> the columns (table, name, type) it added: additive only, so nothing stored changes. A column
already there is left as it is (a store some development build half-migrated still comes up whole)."""


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables in an empty database, migrate an older one; refuse one written by a newer schema.

    All in one immediate transaction, version read inside it: two processes opening an old store at
    once migrate it once, and a store is either migrated whole or left as it was.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        old = _version(conn)
        if old is not None and old < SCHEMA_VERSION:
            for target in sorted(_MIGRATIONS):
                for table, column, kind in _MIGRATIONS[target]:
                    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                    if have and column not in have:  # a table not there yet comes whole from the DDL below
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        for statement in _DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        if old is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    version = _version(conn)
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"the store was written by a newer orchestrator (schema {version}, this one reads {SCHEMA_VERSION})"
        )


def _version(conn: sqlite3.Connection) -> int | None:
    """The store's schema version, None for an empty database."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone() is None:
        return None
    (version,) = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return None if version is None else int(version)


def dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    """A row as a dict keyed by column name (the store's row factory)."""
    return {d[0]: value for d, value in zip(cursor.description, row, strict=True)}


def unwritable(path: Path) -> str | None:
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


def open_read_only(path: Path, why: str) -> sqlite3.Connection:
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
        conn.row_factory = dict_row
        return conn
    raise StoreError(f"cannot read the store {path} ({why}): {last}{damage_fix(path, last)}")




def damage_fix(path: Path, error: BaseException | None) -> str:
    """The fix to append to an SQLite error that means the file itself is damaged (cut short, overwritten)."""
    text = str(error or "")
    if "malformed" not in text and "not a database" not in text:
        return ""
    return (
        f" (the file is damaged, e.g. cut short by a full disk or a copy that stopped; fix: restore {path} from a "
        f"copy, or save what is readable into a new store: sqlite3 {path} .recover | sqlite3 recovered.db, then "
        "pass --db recovered.db)"
    )


@contextmanager
def _mapped(what: str, path: Path) -> Iterator[None]:
    """Translate sqlite3's exceptions into StoreError here, at the seam (with the fix for a damaged file)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{what}: {exc}{damage_fix(path, exc)}") from exc


class StoreFile:
    """One open store file: the connection, its lock, and how rows are read and written (the Store's base)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"no store at {self.path} (run a sweep first, or pass --db / set ORCHESTRATOR_DB)")
        self._lock = threading.RLock()
        self.read_only = False
        unwritable_why = unwritable(self.path)
        if unwritable_why and create:
            raise StoreError(
                f"cannot write the store {self.path}: {unwritable_why} (fix: pass --db PATH or set ORCHESTRATOR_DB "
                "to a file on a writable filesystem)"
            )
        if unwritable_why:
            # Reading a night's results must work from a read-only copy (an archive, a read-only mount).
            self._conn = open_read_only(self.path, unwritable_why)
            self.read_only = True
            return
        with _mapped(f"cannot open the store {self.path}", self.path):
            self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._conn.execute("PRAGMA foreign_keys = ON")
                ensure_schema(self._conn)
                self._conn.row_factory = dict_row
            except BaseException:
                self._conn.close()
                raise

    def close(self) -> None:
        """Close the connection (everything written is already committed)."""
        with self._lock:
            self._conn.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A record that does not read back is named with the store's path and the fix, never a traceback."""
        try:
            yield
        except DamagedRecord as exc:
            raise StoreError(exc.fix(self.path)) from exc

    def _write(self, what: str, sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> int:
        with self._lock, _mapped(what, self.path):
            return self._conn.execute(sql, params).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock, _mapped(f"cannot read the store {self.path}", self.path):
            return self._conn.execute(sql, params).fetchall()

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock, _mapped(what, self.path):
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
            where = {"sweep": "`orchestrator sweeps` lists them", "run": "`orchestrator table SWEEP --format json` "
                     "gives each cell's run_id"}.get(kind, "")  # fmt: skip
            fix = f" (fix: {where})" if where else ""
            raise StoreError(f"no {kind} matches {ref!r} in {self.path}{fix}")
        shown = ", ".join(r[key] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
        raise StoreError(f"{kind} id {ref!r} is ambiguous: it matches {shown}")
