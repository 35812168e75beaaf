"""Seam 3: the SQLite result store, its records, and where the database lives by default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from orchestrator.store.records import RunRecord, SweepRecord, new_run_id, new_sweep_id
from orchestrator.store.results import CellResult, aggregate
from orchestrator.store.sqlite import Store

__all__ = [
    "CellResult",
    "RunRecord",
    "Store",
    "SweepRecord",
    "aggregate",
    "default_db_path",
    "new_run_id",
    "new_sweep_id",
]

DEFAULT_DB = "orchestrator.db"


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    """The store every command uses without `--db`: $ORCHESTRATOR_DB, else ./orchestrator.db."""
    env = os.environ if environ is None else environ
    return Path(env.get("ORCHESTRATOR_DB") or DEFAULT_DB)
