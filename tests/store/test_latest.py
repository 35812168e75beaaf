"""Which sweep is "the latest", the store's list of sweeps, `SWEEP:CELL` run ids, and a damaged store's errors."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from orchestrator.errors import StoreError
from orchestrator.model import Cell, Status
from orchestrator.store import Store
from orchestrator.store.records import COMMAND_LINE, REPRO_OF, SweepRecord
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

NIGHT = "s-20261202-010000-0001"
ONE_RUN = "s-20261202-080000-0002"
REPRO = "s-20261202-081000-0003"
ALL_INVALID = "s-20261202-082000-0004"
OTHER_HOST = "s-20261202-083000-0005"


def add_sweep(store: Store, record: SweepRecord, cells: list[Cell], statuses: list[Status], launch: bool) -> None:
    """A sweep whose cells finished with these statuses; launched runs get a run directory, as on a host."""
    store.create_sweep(record)
    store.save_cells(record.sweep_id, cells)
    for cell, status in zip(cells, statuses, strict=True):
        run = make_run(cell, sweep_id=record.sweep_id)
        store.create_run(run)
        if launch and status is not Status.INVALID:
            store.mark_launched(run.run_id, f"/w/runs/{run.run_id}", 42, 30000, [0])
        store.finish_run(run.run_id, make_outcome(), None, make_verdict(status), {})


def morning(db: Path) -> Store:
    """A night's sweep, then a one-cell `run`, a repro, an all-invalid sweep and a sweep on another host."""
    store = Store(db)
    cells = [make_cell("triton"), make_cell("flashinfer"), make_cell("cutlass")]
    night = make_sweep(NIGHT, 1_800_000_000.0, settings={"retries": 1, "deadlines": {"model_load": 600.0}})
    add_sweep(store, night, cells, [Status.PASS, Status.FAIL, Status.FAIL], True)
    one = make_sweep(ONE_RUN, 1_800_030_000.0, name="run", matrix_path=COMMAND_LINE)
    add_sweep(store, one, [make_cell("triton")], [Status.PASS], True)
    repro = make_sweep(REPRO, 1_800_031_000.0, settings={REPRO_OF: "r-0123456789"})
    add_sweep(store, repro, [make_cell("flashinfer")], [Status.FAIL], True)
    typo = make_sweep(ALL_INVALID, 1_800_032_000.0)
    add_sweep(store, typo, [make_cell("trition"), make_cell("flashinfr")], [Status.INVALID] * 2, False)
    return store


def test_the_latest_sweep_is_the_night_not_a_run_a_repro_or_an_all_invalid_sweep(tmp_path: Path) -> None:
    with morning(tmp_path / "o.db") as store:
        assert [r.sweep_id for r in store.list_sweeps()][:1] == [ALL_INVALID]
        latest = store.latest_sweep()
        assert latest is not None and latest.sweep_id == NIGHT
        assert store.resolve_sweep(None).sweep_id == NIGHT
        # A newer sweep of a matrix that launched something is the latest, whatever its host.
        add_sweep(store, make_sweep(OTHER_HOST, 1_800_033_000.0, host="box2"), [make_cell()], [Status.PASS], True)
        assert store.resolve_sweep(None).sweep_id == OTHER_HOST


def test_a_store_with_no_launching_sweep_shows_its_newest(tmp_path: Path) -> None:
    with Store(tmp_path / "o.db") as store:
        one = make_sweep(ONE_RUN, 1_800_030_000.0, name="run", matrix_path=COMMAND_LINE)
        add_sweep(store, one, [make_cell("triton")], [Status.PASS], True)
        add_sweep(store, make_sweep(ALL_INVALID, 1_800_032_000.0), [make_cell()], [Status.INVALID], False)
        assert store.resolve_sweep(None).sweep_id == ALL_INVALID


def test_summaries_name_each_sweeps_kind_launches_and_counts(tmp_path: Path) -> None:
    with morning(tmp_path / "o.db") as store:
        rows = {s.sweep.sweep_id: s for s in store.sweep_summaries()}
    assert list(rows) == [ALL_INVALID, REPRO, ONE_RUN, NIGHT]
    night = rows[NIGHT]
    assert (night.kind, night.launched, night.cells, night.latest) == ("sweep", 3, 3, True)
    assert night.counts == {"pass": 1, "fail": 2}
    assert (rows[ONE_RUN].kind, rows[REPRO].kind, rows[ALL_INVALID].kind) == ("run", "repro", "sweep")
    assert (rows[ALL_INVALID].launched, rows[ALL_INVALID].counts) == (0, {"invalid": 2})
    assert not any(rows[s].latest for s in (ONE_RUN, REPRO, ALL_INVALID))
    entry = night.to_dict()
    assert (entry["sweep_id"], entry["pass"], entry["fail"], entry["cells"], entry["latest"]) == (NIGHT, 1, 2, 3, True)


def test_the_latest_sweep_of_the_same_matrix_on_the_same_host(tmp_path: Path) -> None:
    with morning(tmp_path / "o.db") as store:
        night = store.get_sweep(NIGHT)
        assert store.latest_like(night) is None  # the run, the repro and the typo sweep are no such sweep
        later = make_sweep("s-20261203-010000-0006", 1_800_090_000.0)
        add_sweep(store, later, [make_cell("triton")], [Status.FAIL], True)
        add_sweep(store, make_sweep(OTHER_HOST, 1_800_095_000.0, host="box2"), [make_cell()], [Status.PASS], True)
        found = store.latest_like(night)
        assert found is not None and found.sweep_id == later.sweep_id
        assert (got := store.latest_like(later)) is not None and got.sweep_id == NIGHT


def test_a_run_is_named_by_sweep_and_cell(tmp_path: Path) -> None:
    with morning(tmp_path / "o.db") as store:
        shown = {r.cell.cell_id: r.run_id for r in store.cell_results(NIGHT)}
        assert store.get_run(f"{NIGHT}:c-flashinfer-fp8_e4m3").run_id == shown["c-flashinfer-fp8_e4m3"]
        # Prefixes of both, as everywhere else an id is taken.
        assert store.get_run("20261202-0100:c-cut").run_id == shown["c-cutlass-fp8_e4m3"]
        with pytest.raises(StoreError, match=r"ambiguous \(c-triton-fp8_e4m3, c-flashinfer") as ambiguous:
            store.get_run(f"{NIGHT}:c-")
        assert "orchestrator table" in str(ambiguous.value) and "run_id" in str(ambiguous.value)
        with pytest.raises(StoreError, match="matches none"):
            store.get_run(f"{NIGHT}:c-nothing")
        with pytest.raises(StoreError, match="no sweep matches"):
            store.get_run("s-1999:c-triton")


def test_a_damaged_record_names_the_store_the_record_and_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    morning(db).close()
    with Store(db) as store:
        run_id = store.cell_results(NIGHT)[1].run_id
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET verdict = substr(verdict, 1, 20) WHERE run_id = ?", (run_id,))
    conn.commit()
    conn.close()
    with Store(db) as store, pytest.raises(StoreError) as damaged:
        store.cell_results(NIGHT)
    message = str(damaged.value)
    assert message.startswith(f"{db}: the verdict of run {run_id} is damaged (not JSON")
    drop = f"DELETE FROM runs WHERE run_id = '{run_id}'"
    assert f"restore {db} from a copy" in message and f'sqlite3 {db} "{drop}"' in message
    # The fix it names works: the rest of the sweep reads again, that cell as not run.
    conn = sqlite3.connect(db)
    conn.execute(drop)
    conn.commit()
    conn.close()
    with Store(db) as store:
        assert [r.status for r in store.cell_results(NIGHT)] == [Status.PASS, None, Status.FAIL]


def test_a_store_cut_short_is_a_store_error_wherever_it_is_cut(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    with Store(db) as store:
        cells = [make_cell("triton"), make_cell("flashinfer")]
        store.create_sweep(make_sweep(NIGHT))
        store.save_cells(NIGHT, cells)
        for cell in cells:
            run = make_run(cell, sweep_id=NIGHT)
            store.create_run(run)
            # A long value spills onto overflow pages at the end of the file: cut there, SQLite's check passes.
            store.finish_run(run.run_id, make_outcome(), {"warnings": ["w" * 6000]}, make_verdict(), {})
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    whole = db.read_bytes()
    seen = set()
    for cut in range(len(whole) - 8192, len(whole), 512):
        copy = tmp_path / f"cut{cut}.db"
        copy.write_bytes(whole[:cut])
        with pytest.raises(StoreError) as cut_short, Store(copy, create=False) as store:
            store.cell_results(store.resolve_sweep(None).sweep_id)
        message = str(cut_short.value)
        assert str(copy) in message and "fix: restore" in message, message
        seen.add("damaged" if "is damaged" in message else "malformed")
        os.remove(copy)
    assert "damaged" in seen  # the case SQLite's integrity check does not catch was among the cuts
