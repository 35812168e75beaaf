"""A cell's runs summed up: k/N, flaky vs deterministic, which run the row shows, whether another run is due."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.model import Category, Phase, Status
from orchestrator.store.records import RunRecord
from orchestrator.store.results import aggregate
from tests.store.test_records import make_cell, make_outcome, make_run, make_verdict

CELL = make_cell()


def done(attempt: int, status: Status, ready_s: float | None = 40.0) -> RunRecord:
    return make_run(
        CELL, attempt, state="done", verdict=make_verdict(status), outcome=make_outcome(ready_s), run_id=f"r-{attempt}"
    )


def test_a_cell_never_run() -> None:
    result = aggregate(CELL, [])
    assert (result.status, result.attempts_text, result.needs_run, result.run_id) == (None, "0/0", True, None)


def test_a_single_pass() -> None:
    result = aggregate(CELL, [done(1, Status.PASS, 12.5)])
    assert (result.status, result.category, result.attempts_text, result.ready_s) == (
        Status.PASS,
        Category.HEALTHY,
        "1/1",
        12.5,
    )
    assert not result.flaky and not result.needs_run


def test_a_deterministic_failure_is_retried_then_settles() -> None:
    first = aggregate(CELL, [done(1, Status.FAIL)], retries_allowed=1)
    assert (first.status, first.attempts_text, first.needs_run, first.flaky) == (Status.FAIL, "0/1", True, False)
    second = aggregate(CELL, [done(2, Status.FAIL), done(1, Status.FAIL)], retries_allowed=1)
    assert (second.status, second.attempts_text, second.needs_run, second.run_id) == (Status.FAIL, "0/2", False, "r-2")
    assert second.phase is Phase.SAMPLED_DECODE and second.category is Category.NAN_IN_PROBS


def test_runs_that_disagree_are_a_flaky_failure_showing_the_failing_run() -> None:
    result = aggregate(CELL, [done(1, Status.FAIL, None), done(2, Status.PASS, 12.0)], retries_allowed=3)
    assert (result.status, result.flaky, result.attempts_text) == (Status.FAIL, True, "1/2")
    assert (result.run_id, result.category, result.ready_s) == ("r-1", Category.NAN_IN_PROBS, None)
    assert not result.needs_run


def test_infra_is_retried_but_is_not_flakiness() -> None:
    infra = replace(done(1, Status.INFRA), verdict=make_verdict(Status.INFRA, category=Category.UNKNOWN))
    assert aggregate(CELL, [infra], retries_allowed=1).needs_run
    result = aggregate(CELL, [infra, done(2, Status.PASS)], retries_allowed=1)
    assert (result.status, result.flaky, result.attempts_text) == (Status.PASS, False, "1/2")


def test_invalid_is_never_retried() -> None:
    assert not aggregate(CELL, [done(1, Status.INVALID)], retries_allowed=2).needs_run


def test_unfinished_and_abandoned_runs_do_not_count() -> None:
    abandoned = make_run(CELL, 1, state="abandoned", run_id="r-a")
    launched = make_run(CELL, 3, state="launched", run_id="r-l")
    other_cell = replace(done(9, Status.PASS), cell_id="someone-else")
    result = aggregate(CELL, [abandoned, done(2, Status.FAIL), launched, other_cell], retries_allowed=5)
    assert (result.attempts_text, result.unfinished_run_id, result.run_id) == ("0/1", "r-l", "r-2")


@given(st.lists(st.sampled_from([Status.PASS, Status.FAIL, Status.INFRA, Status.INVALID]), min_size=1, max_size=6))
def test_aggregation_rules_hold_for_any_history(statuses: list[Status]) -> None:
    runs = [done(i + 1, s) for i, s in enumerate(statuses)]
    result = aggregate(CELL, runs, retries_allowed=len(statuses))
    both = Status.PASS in statuses and Status.FAIL in statuses
    assert result.flaky is both
    assert result.status is (Status.FAIL if both else statuses[-1])
    assert result.passes == statuses.count(Status.PASS) and result.attempts == len(statuses)
    assert result.needs_run is (statuses[-1] in (Status.FAIL, Status.INFRA) and not both)
