"""`--resume` owes a cell an attempt exactly when the table says it needs one, as the scheduler would have decided.

A real store holds each cell's finished runs; `jobs_left` reads them back. Port races are not counted against a
cell's retries on resume either, and the ports they lost are never handed to the cell again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from orchestrator.model import Category, Cell, Status, Verdict
from orchestrator.planning.cells import CellPlan
from orchestrator.retries import decide_after
from orchestrator.settings import RetryPolicy
from orchestrator.store import Store
from orchestrator.sweep.preflight import Preflight
from orchestrator.sweep.recover import jobs_left
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

SWEEP = "s-20261207-040000-ab12"
NAN = make_verdict(Status.FAIL)
RACE = make_verdict(Status.INFRA, category=Category.PORT_IN_USE, root_cause_line="[Errno 98] address already in use")
SSH_LOST = make_verdict(Status.INFRA, category=Category.UNKNOWN, root_cause_line=None, reason="ssh: connection lost")
PASS = make_verdict(Status.PASS)

HISTORIES: dict[str, tuple[Verdict, ...]] = {
    "raced-after-nan": (NAN, RACE),
    "lost-ssh-after-nan": (NAN, SSH_LOST),
    "passed": (PASS,),
    "never-run": (),
    "raced-too-often": (RACE, RACE, RACE, RACE),
    "nan-race-nan": (NAN, RACE, NAN),
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "orchestrator.db") as opened:
        opened.create_sweep(make_sweep(SWEEP, settings={"retries": 1}))
        opened.save_cells(SWEEP, [make_cell(name) for name in HISTORIES])
        yield opened


def _record(store: Store, cell: Cell, verdicts: Sequence[Verdict]) -> None:
    for attempt, verdict in enumerate(verdicts, 1):
        run = make_run(cell, attempt, sweep_id=SWEEP)
        store.create_run(run)
        store.mark_launched(run.run_id, f"/w/{run.run_id}", 100 + attempt, 30000 + 1100 * attempt, [0])
        store.finish_run(run.run_id, make_outcome(), None, verdict, {})


def test_resume_owes_what_the_table_says_and_what_the_scheduler_would_have_launched(store: Store) -> None:
    cells = {c.cell_id: c for c in store.get_cells(SWEEP)}
    for name, verdicts in HISTORIES.items():
        _record(store, make_cell(name), verdicts)
    preflight = Preflight([CellPlan(c, argv=()) for c in cells.values()], {}, {})
    jobs = {j.plan.cell.cell_id: j for j in jobs_left(store, SWEEP, preflight, retries=1)}
    needed = {r.cell.cell_id for r in store.cell_results(SWEEP, retries_allowed=1) if r.needs_run}
    uninterrupted = {
        make_cell(name).cell_id for name, v in HISTORIES.items() if decide_after(v, RetryPolicy(), 1).again
    }
    assert set(jobs) == needed == uninterrupted
    # The NaN's retry lost its port: the retry is still owed, as attempt 3, never on the port it lost.
    raced = jobs[make_cell("raced-after-nan").cell_id]
    assert (raced.attempt, raced.history, raced.raced) == (3, (NAN, RACE), frozenset({30000 + 2 * 1100}))
    assert jobs[make_cell("never-run").cell_id].attempt == 1
    for done in ("lost-ssh-after-nan", "passed", "raced-too-often", "nan-race-nan"):
        assert make_cell(done).cell_id not in jobs, done
