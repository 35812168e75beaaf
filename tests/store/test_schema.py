"""The store as a plan grows: cells added to a sweep, their origin, a v1 store migrated, the host's history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.model import Status
from orchestrator.store import Store
from orchestrator.store.schema import SCHEMA_VERSION
from tests.store.test_records import make_cell, make_run, make_sweep, make_verdict

SWEEP = "s-20261202-153012-ab12"
V1_DDL = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
CREATE TABLE sweeps (sweep_id TEXT PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, matrix_yaml TEXT NOT NULL,
    matrix_path TEXT, started_at REAL NOT NULL, ended_at REAL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted')),
    host_facts TEXT NOT NULL, versions TEXT NOT NULL, settings TEXT NOT NULL);
CREATE TABLE cells (sweep_id TEXT NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE, position INTEGER NOT NULL,
    cell_id TEXT NOT NULL, flags TEXT NOT NULL, axes TEXT NOT NULL, env_names TEXT NOT NULL, install TEXT,
    PRIMARY KEY (sweep_id, cell_id), UNIQUE (sweep_id, position));
INSERT INTO sweeps VALUES ('s-old', 'm', 'sim', 'name: m', NULL, 1.0, 2.0, 'done', '{}', '{"sglang":"0.5.9"}', '{}');
INSERT INTO cells VALUES ('s-old', 0, 'c-old', '{"attention-backend":"triton"}', '["attention-backend"]', '[]', NULL);
"""


def test_cells_are_added_after_the_saved_ones_once_with_their_origin(tmp_path: Path) -> None:
    with Store(tmp_path / "o.db") as store:
        store.create_sweep(make_sweep(SWEEP))
        first = [make_cell("triton"), make_cell("flashinfer")]
        store.save_cells(SWEEP, first, "covering")
        added = store.add_cells(SWEEP, [make_cell("flashinfer"), make_cell("cutlass"), make_cell("fa3")], "localise")
        assert [c.cell_id for c in added] == ["c-cutlass-fp8_e4m3", "c-fa3-fp8_e4m3"]
        assert store.add_cells(SWEEP, [make_cell("cutlass")], "localise") == []
        ids = [c.cell_id for c in store.get_cells(SWEEP)]
        assert ids == ["c-triton-fp8_e4m3", "c-flashinfer-fp8_e4m3", "c-cutlass-fp8_e4m3", "c-fa3-fp8_e4m3"]
        origins = store.cell_origins(SWEEP)
        assert list(origins.values()) == ["covering", "covering", "localise", "localise"]
        # save_cells stays a no-op on resume only for the same cells; the plan grows through add_cells.
        store.update_sweep_settings(SWEEP, {"strategy": "full"})
        assert store.get_sweep(SWEEP).settings["strategy"] == "full"
        assert store.get_sweep(SWEEP).settings["retries"] == 1


def test_a_version_1_store_is_migrated_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(V1_DDL)
    conn.close()
    with Store(db) as store:
        assert [c.cell_id for c in store.get_cells("s-old")] == ["c-old"]
        assert store.cell_origins("s-old") == {"c-old": None}
        assert store.add_cells("s-old", [make_cell("triton")], "fill")[0].cell_id == "c-triton-fp8_e4m3"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert "origin" in [row[1] for row in conn.execute("PRAGMA table_info(cells)")]
    conn.close()
    Store(db).close()  # opening a migrated store again changes nothing


def test_host_history_is_every_finished_run_on_the_host_oldest_first(tmp_path: Path) -> None:
    with Store(tmp_path / "o.db") as store:
        for sweep_id, host, start in (("s-1", "sim", 1.0), ("s-2", "sim", 2.0), ("s-3", "other", 3.0)):
            store.create_sweep(make_sweep(sweep_id, started_at=start, host=host))
            cell = make_cell("triton")
            store.save_cells(sweep_id, [cell])
            run = make_run(cell, sweep_id=sweep_id, started_at=start)
            store.create_run(run)
            store.finish_run(run.run_id, None, None, make_verdict(Status.FAIL), {}, ended_at=start + 0.5)
        pending = make_run(make_cell("triton"), attempt=2, sweep_id="s-2")
        store.create_run(pending)
        history = store.host_history("sim", ["c-triton-fp8_e4m3"])
        assert [p.run.sweep_id for p in history] == ["s-1", "s-2"]
        assert history[0].versions["sglang"] == "0.5.9" and history[0].host_facts["gpu_name"] == "RTX PRO 6000"
        assert history[0].cell.flags["attention-backend"] == "triton"
        assert store.host_history("sim", ["nothing"]) == []
        assert len(store.host_history("other")) == 1
