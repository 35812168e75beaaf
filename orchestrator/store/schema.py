"""The store's SQLite schema and its version; dict-valued columns hold JSON text (see records.py)."""

from __future__ import annotations

import sqlite3

from orchestrator.errors import StoreError

SCHEMA_VERSION = 1

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
"""


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables in an empty database; refuse one written by a newer schema."""
    conn.executescript(
        f"BEGIN IMMEDIATE;{_DDL}"
        f"INSERT INTO schema_version (version) SELECT {SCHEMA_VERSION}"
        " WHERE NOT EXISTS (SELECT 1 FROM schema_version);"
        "COMMIT;"
    )
    (version,) = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the store was written by a newer orchestrator (schema {version}, this one reads {SCHEMA_VERSION})"
        )
    _add_missing_columns(conn)


_ADDED_COLUMNS = (("runs", "job_id", "TEXT"), ("runs", "node", "TEXT"))
"""Nullable columns added after schema 1: a store written before them gains them when opened (all NULL)."""


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    for table, column, kind in _ADDED_COLUMNS:
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            try:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:  # another process added it meanwhile
                if "duplicate column" not in str(exc):
                    raise
