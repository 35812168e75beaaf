"""The SQLite store: schema, lifecycle of a run, resume queries, id resolution, crash safety, threads, secrets."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import StoreError
from orchestrator.model import Status
from orchestrator.store import Store, default_db_path
from orchestrator.store.schema import SCHEMA_VERSION
from tests.paths import REPO
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

SWEEP = "s-20261202-153012-ab12"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orchestrator.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    with Store(db) as opened:
        opened.create_sweep(make_sweep(SWEEP))
        opened.save_cells(SWEEP, [make_cell("triton"), make_cell("flashinfer"), make_cell("cutlass")])
        yield opened


def test_schema_is_versioned_and_the_file_is_in_wal_mode(store: Store, db: Path) -> None:
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_store_from_a_newer_orchestrator_is_refused(db: Path) -> None:
    Store(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer orchestrator"):
        Store(db)


def test_a_file_that_is_not_a_store_is_a_store_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store(junk)


def test_opening_a_missing_store_without_create_fails_and_creates_nothing(db: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        Store(db, create=False)
    assert not db.exists()


def test_default_db_path() -> None:
    assert default_db_path({}) == Path("orchestrator.db")
    assert default_db_path({"ORCHESTRATOR_DB": "/data/o.db"}) == Path("/data/o.db")


def test_sweep_round_trip_and_updates(store: Store) -> None:
    assert store.get_sweep(SWEEP) == make_sweep(SWEEP)
    store.update_sweep_facts(SWEEP, {"gpus": 4}, {"sglang": "0.5.10"})
    store.finish_sweep(SWEEP, "interrupted", 1_800_000_900.0)
    got = store.get_sweep(SWEEP)
    assert (got.host_facts, got.versions, got.status, got.ended_at) == (
        {"gpus": 4},
        {"sglang": "0.5.10"},
        "interrupted",
        1_800_000_900.0,
    )
    store.reopen_sweep(SWEEP)
    assert (store.get_sweep(SWEEP).status, store.get_sweep(SWEEP).ended_at) == ("running", None)
    with pytest.raises(StoreError, match="no sweep"):
        store.get_sweep("s-nope")


def test_cells_keep_their_order_and_saving_them_again_is_a_no_op(store: Store) -> None:
    ids = [c.cell_id for c in store.get_cells(SWEEP)]
    assert ids == ["c-triton-fp8_e4m3", "c-flashinfer-fp8_e4m3", "c-cutlass-fp8_e4m3"]
    store.save_cells(SWEEP, [make_cell("triton"), make_cell("flashinfer"), make_cell("cutlass")])
    with pytest.raises(StoreError, match="different cells"):
        store.save_cells(SWEEP, [make_cell("triton")])
    store.create_sweep(make_sweep("s-20261202-160000-0001"))
    with pytest.raises(StoreError, match="duplicate cell ids"):
        store.save_cells("s-20261202-160000-0001", [make_cell("triton"), make_cell("triton")])
    assert store.get_cells("s-20261202-160000-0001") == []


def test_a_run_moves_forward_only(store: Store) -> None:
    run = make_run(make_cell("triton"))
    store.create_run(run)
    assert store.get_run(run.run_id) == run
    launched = store.mark_launched(run.run_id, "/w/runs/x", pgid=77, port=30000, gpus=[0, 1])
    assert (launched.state, launched.pgid, launched.gpus) == ("launched", 77, (0, 1))
    with pytest.raises(StoreError, match="is launched, expected pending"):
        store.mark_launched(run.run_id, "/w/runs/x", pgid=77, port=30000, gpus=[0])
    done = store.finish_run(run.run_id, make_outcome(), {"warnings": []}, make_verdict(), {"ready": 41.5}, 2e9)
    assert store.get_run(run.run_id) == done
    assert (done.state, done.verdict, done.timings, done.ended_at) == ("done", make_verdict(), {"ready": 41.5}, 2e9)
    with pytest.raises(StoreError, match="is done"):
        store.finish_run(run.run_id, None, None, make_verdict(Status.PASS), {})
    with pytest.raises(StoreError, match="is done"):
        store.discard_run(run.run_id)


def test_new_runs_must_be_pending_belong_to_a_cell_and_have_fresh_attempts(store: Store) -> None:
    with pytest.raises(StoreError, match="must be pending"):
        store.create_run(make_run(make_cell("triton"), state="done"))
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        store.create_run(make_run(make_cell("unknown-backend")))
    store.create_run(make_run(make_cell("triton")))
    with pytest.raises(StoreError, match="UNIQUE"):
        store.create_run(make_run(make_cell("triton")))
    assert store.next_attempt(SWEEP, "c-triton-fp8_e4m3") == 2
    assert store.next_attempt(SWEEP, "c-cutlass-fp8_e4m3") == 1


def test_resume_queries(store: Store) -> None:
    triton, flashinfer, cutlass = store.get_cells(SWEEP)
    finished, in_flight, never_launched = make_run(triton), make_run(flashinfer), make_run(cutlass)
    for run in (finished, in_flight, never_launched):
        store.create_run(run)
    store.mark_launched(finished.run_id, "/w/a", 1, 30000, [0])
    store.finish_run(finished.run_id, make_outcome(), None, make_verdict(Status.PASS), {})
    store.mark_launched(in_flight.run_id, "/w/b", 2, 30001, [1])
    assert [r.run_id for r in store.unfinished_runs(SWEEP)] == [in_flight.run_id, never_launched.run_id]
    store.discard_run(never_launched.run_id, ended_at=5.0)
    assert [r.run_id for r in store.unfinished_runs(SWEEP)] == [in_flight.run_id]
    assert store.get_run(never_launched.run_id).state == "abandoned"
    results = store.cell_results(SWEEP)
    assert [r.status for r in results] == [Status.PASS, None, None]
    assert [r.needs_run for r in results] == [False, True, True]
    assert results[1].unfinished_run_id == in_flight.run_id
    assert [r.run_id for r in store.runs(SWEEP)] == [finished.run_id, in_flight.run_id, never_launched.run_id]


def test_sweep_resolution(store: Store) -> None:
    store.create_sweep(make_sweep("s-20261203-090000-aaaa", started_at=1_800_100_000.0))
    store.create_sweep(make_sweep("s-20261203-090000-aabb", started_at=1_800_100_001.0))
    assert store.resolve_sweep(None).sweep_id == "s-20261203-090000-aabb"
    assert store.resolve_sweep(SWEEP).sweep_id == SWEEP
    assert store.resolve_sweep("s-20261202").sweep_id == SWEEP
    assert store.resolve_sweep("20261202").sweep_id == SWEEP
    assert store.resolve_sweep("s-20261203-090000-aab").sweep_id == "s-20261203-090000-aabb"
    with pytest.raises(StoreError, match="ambiguous: it matches s-20261203-090000-aaaa, s-20261203-090000-aabb"):
        store.resolve_sweep("s-20261203")
    with pytest.raises(StoreError, match=r"no sweep matches .* \(fix: `orchestrator sweeps` lists them\)"):
        store.resolve_sweep("s-1999")
    with pytest.raises(StoreError, match="empty"):
        store.resolve_sweep("")
    assert store.list_sweeps()[0].sweep_id == "s-20261203-090000-aabb"


def test_resolving_in_an_empty_store(db: Path) -> None:
    with Store(db) as empty:
        assert empty.latest_sweep() is None
        assert empty.list_sweeps() == []
        with pytest.raises(StoreError, match="no sweeps"):
            empty.resolve_sweep(None)


def test_run_prefix_lookup(store: Store) -> None:
    run = make_run(make_cell("triton"), run_id="r-0123456789")
    store.create_run(run)
    store.create_run(make_run(make_cell("cutlass"), run_id="r-0124456789"))
    assert store.get_run("r-01234").run_id == run.run_id
    assert store.get_run("01234").run_id == run.run_id
    with pytest.raises(StoreError, match="ambiguous"):
        store.get_run("r-012")
    with pytest.raises(StoreError, match="no run matches"):
        store.get_run("r-ff")


def test_a_pending_run_survives_a_kill_9(db: Path) -> None:
    """The writer dies by SIGKILL right after writing; nothing it wrote is lost."""
    script = f"""
import os, signal
from orchestrator.store import Store
from tests.store.test_records import make_cell, make_run, make_sweep
store = Store({str(db)!r})
store.create_sweep(make_sweep({SWEEP!r}))
store.save_cells({SWEEP!r}, [make_cell("triton")])
store.create_run(make_run(make_cell("triton"), run_id="r-aaaaaaaaaa"))
store.mark_launched("r-aaaaaaaaaa", "/w/runs/r-aaaaaaaaaa", 4242, 30000, [0, 1])
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, check=False)
    assert proc.returncode == -9
    with Store(db) as reopened:
        [run] = reopened.unfinished_runs(SWEEP)
        assert (run.run_id, run.state, run.pgid, run.gpus) == ("r-aaaaaaaaaa", "launched", 4242, (0, 1))


def test_a_second_store_sees_writes_at_once(store: Store, db: Path) -> None:
    run = make_run(make_cell("triton"))
    store.create_run(run)
    with Store(db) as other:
        assert other.get_run(run.run_id) == run


def test_threads_write_concurrently(db: Path) -> None:
    """Packed cells write from their own threads while the live table reads."""
    cells = [make_cell(f"backend{i}") for i in range(8)]
    errors: list[BaseException] = []
    with Store(db) as store:
        store.create_sweep(make_sweep(SWEEP))
        store.save_cells(SWEEP, cells)

        def attempts(cell_index: int) -> None:
            cell = cells[cell_index]
            try:
                for _ in range(10):
                    run = make_run(cell, attempt=store.next_attempt(SWEEP, cell.cell_id))
                    store.create_run(run)
                    store.mark_launched(run.run_id, f"/w/{run.run_id}", cell_index, 30000 + cell_index, [cell_index])
                    store.finish_run(run.run_id, make_outcome(), None, make_verdict(), {"ready": 1.0})
                    store.cell_results(SWEEP)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=attempts, args=(i,)) for i in range(len(cells))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        runs = store.runs(SWEEP)
        assert len(runs) == 80 and all(r.state == "done" for r in runs)
        assert [r.attempts for r in store.cell_results(SWEEP, retries_allowed=9)] == [10] * 8


def test_no_secret_reaches_the_database_file(db: Path) -> None:
    token = "hf_SuperSecretValue0123456789"
    with Store(db) as store:
        store.create_sweep(
            make_sweep(SWEEP, matrix_yaml=f"env:\n  HF_TOKEN: {token}\n", settings={"env": {"HF_TOKEN": token}})
        )
        cell = make_cell("triton", env={"HF_TOKEN": token}, flags={"api-key": token, "tp-size": 8})
        store.save_cells(SWEEP, [cell])
        run = make_run(cell, env_masked={"HF_TOKEN": token}, command=f"HF_TOKEN={token} python -m x --api-key {token}")
        store.create_run(run)
        store.finish_run(run.run_id, None, {"lines": [f"api_key='{token}'"]}, make_verdict(), {})
        assert token not in repr(store.get_run(run.run_id))
    data = b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))
    assert data, "the database files are there"
    assert token.encode() not in data
