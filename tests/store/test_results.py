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


def infra(attempt: int, category: Category = Category.UNKNOWN) -> RunRecord:
    return replace(done(attempt, Status.INFRA), verdict=make_verdict(Status.INFRA, category=category))


def port_race(attempt: int) -> RunRecord:
    return infra(attempt, Category.PORT_IN_USE)


def test_infra_is_retried_but_is_not_flakiness() -> None:
    assert aggregate(CELL, [infra(1)], retries_allowed=1).needs_run
    result = aggregate(CELL, [infra(1), done(2, Status.PASS)], retries_allowed=1)
    assert (result.status, result.flaky, result.attempts_text, result.infra_runs) == (Status.PASS, False, "1/1", 1)


def test_an_infra_attempt_after_a_proven_failure_does_not_hide_it() -> None:
    # The demo's cell eafb5a81ff: NaN on attempt 1, its retry lost its port (infra), its retries used up.
    result = aggregate(CELL, [done(1, Status.FAIL), port_race(2)], retries_allowed=1)
    assert (result.status, result.category, result.run_id) == (Status.FAIL, Category.NAN_IN_PROBS, "r-1")
    assert (result.attempts_text, result.infra_runs) == ("0/1", 1)
    entry = result.to_dict()
    assert (entry["status"], entry["category"], entry["attempts"], entry["infra_runs"]) == ("fail", "nan_in_probs",
                                                                                             "0/1", 1)  # fmt: skip
    ssh = aggregate(CELL, [done(1, Status.FAIL), infra(2)], retries_allowed=1)
    assert (ssh.status, ssh.run_id, ssh.needs_run) == (Status.FAIL, "r-1", False)
    assert ssh.retry_reason.startswith("attempt 2 ended infra, which proves nothing about the flags"), ssh.retry_reason


def test_an_infra_attempt_after_a_pass_does_not_hide_it() -> None:
    result = aggregate(CELL, [done(1, Status.PASS, 12.0), infra(2)], retries_allowed=1)
    assert (result.status, result.run_id, result.ready_s, result.attempts_text) == (Status.PASS, "r-1", 12.0, "1/1")
    assert not result.flaky and not result.needs_run


def test_infra_attempts_do_not_dilute_a_flaky_cells_pass_rate() -> None:
    result = aggregate(CELL, [done(1, Status.FAIL), done(2, Status.PASS), infra(3)], retries_allowed=3)
    assert (result.status, result.flaky, result.attempts_text, result.run_id) == (Status.FAIL, True, "1/2", "r-1")
    assert [r.run_id for r in result.runs] == ["r-1", "r-2"]


def test_a_cell_whose_only_runs_are_infra_stays_infra() -> None:
    result = aggregate(CELL, [infra(1), port_race(2)], retries_allowed=1)
    assert (result.status, result.category, result.run_id) == (Status.INFRA, Category.PORT_IN_USE, "r-2")
    assert (result.attempts_text, result.infra_runs) == ("0/2", 2)


def test_a_port_race_leaves_the_retry_owed_and_a_deterministic_failure_owes_none() -> None:
    raced = aggregate(CELL, [done(1, Status.FAIL), port_race(2)], retries_allowed=1)
    assert raced.needs_run and raced.retry_reason.startswith("relaunched on another port"), raced.retry_reason
    wrong_flag = replace(done(1, Status.FAIL), verdict=make_verdict(Status.FAIL, category=Category.UNSUPPORTED_CONFIG))
    assert not aggregate(CELL, [wrong_flag], retries_allowed=2).needs_run  # as the scheduler decides: never again


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
    proven = [s for s in statuses if s is not Status.INFRA]
    assert result.flaky is both
    assert result.status is (Status.FAIL if both else (proven or statuses)[-1])
    assert result.passes == statuses.count(Status.PASS) and result.attempts == len(proven or statuses)
    assert result.infra_runs == statuses.count(Status.INFRA)
    assert result.needs_run is (statuses[-1] in (Status.FAIL, Status.INFRA) and not both)
