"""The store's SQLite schema and its version; dict-valued columns hold JSON text (see records.py)."""

from __future__ import annotations

import sqlite3

from orchestrator.errors import StoreError

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
