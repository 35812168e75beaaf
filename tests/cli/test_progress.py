"""The live view's arithmetic on a simulated clock: an ETA close to the real time left, counts as the table has them."""

from __future__ import annotations

import heapq
import io

import pytest
from rich.console import Console

from orchestrator.cli.progress import SweepProgress
from orchestrator.model import Category, Cell, Phase, Status, Verdict
from orchestrator.planning.cells import CellPlan
from orchestrator.sweep.cell_run import AttemptResult, Slot
from orchestrator.sweep.preflight import Preflight

FAIL = Verdict(Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS)
PASS = Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY)
PORT_RACE = Verdict(Status.INFRA, Phase.MODEL_LOAD, Category.PORT_IN_USE)
INFRA = Verdict(Status.INFRA, Phase.MODEL_LOAD, Category.UNKNOWN)
REJECTED = Verdict(Status.FAIL, Phase.ARG_PARSE, Category.INVALID_ARGUMENT)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cells(n: int) -> list[Cell]:
    return [Cell(cell_id=f"c{i}", flags={"x": i}, axes=("x",)) for i in range(n)]


def progress(clock: Clock, n: int, retries: int) -> tuple[SweepProgress, io.StringIO]:
    out = io.StringIO()
    view = SweepProgress(Console(file=out, width=200), retries=retries, clock=clock)
    view.on_plan(Preflight([CellPlan(c, ("--x",)) for c in cells(n)], {"sglang": "0.5.9"}, {}))
    return view, out


def simulate(n: int, width: int, retries: int, fails: set[int], seconds: float) -> list[tuple[float, float]]:
    """A sweep of n cells on `width` slots, attempts of `seconds`: (predicted, actual) seconds left at each result."""
    clock = Clock()
    view, _ = progress(clock, n, retries)
    queue = [(c, 1) for c in cells(n)]
    running: list[tuple[float, int, Cell, int]] = []
    predictions: list[tuple[float, float]] = []
    seq = 0
    while queue or running:
        while queue and len(running) < width:
            cell, attempt = queue.pop(0)
            view.on_event(cell, "launched", None)
            heapq.heappush(running, (clock.now + seconds, seq, cell, attempt))
            seq += 1
        clock.now, _, cell, attempt = heapq.heappop(running)
        failed = int(cell.cell_id[1:]) in fails
        view.on_result(AttemptResult(cell, f"r{seq}", FAIL if failed else PASS, Slot((0,), 1), True))
        if failed and attempt <= retries:
            queue.insert(0, (cell, attempt + 1))
        eta = view.eta_s()
        assert eta is not None
        predictions.append((clock.now, eta))
    end = clock.now
    return [(eta, end - at) for at, eta in predictions]


@pytest.mark.parametrize(("width", "retries"), [(1, 1), (4, 1), (1, 0), (8, 2)])
def test_the_eta_is_close_to_the_time_actually_left(width: int, retries: int) -> None:
    """Half the cells fail and are retried: the ETA counts those attempts too (it once counted cells only)."""
    pairs = simulate(30, width, retries, fails=set(range(0, 30, 2)), seconds=3.0)
    # Once a fifth of the attempts have finished, the prediction is within a quarter of the truth (or, near the end
    # of a packed sweep, within one and a half attempts: the last wave's launches end together).
    middle = pairs[len(pairs) // 5 :]
    off = [(round(p, 1), round(a, 1)) for p, a in middle if abs(p - a) > max(0.25 * a, 1.5 * 3.0)]
    assert off == [], off
    assert pairs[-1] == (0.0, 0.0)


def test_counts_follow_the_table_and_a_retry_is_marked() -> None:
    clock = Clock()
    view, out = progress(clock, 2, retries=1)
    first, second = cells(2)
    for cell, verdict in ((first, FAIL), (first, PASS), (second, PASS)):
        view.on_event(cell, "launched", None)
        clock.now += 2
        view.on_result(AttemptResult(cell, "r", verdict, Slot((0,), 1), True))
    # A fail then a pass is a flaky cell, `fail` in the table: the last frame must not say 2 pass.
    assert dict(view.counts) == {"fail": 1, "pass": 1}
    assert view.done == 2
    head = view._render().renderables[0]
    assert "cell 2 of 2" in str(head) and "fail 1, pass 1" in str(head)
    lines = out.getvalue().splitlines()
    attempts = [line for line in lines if line.startswith("* x=0")]
    assert attempts[0].startswith("* x=0: fail") and attempts[1].startswith("* x=0 (retry 1 of 1): pass")
    assert "flaky, counted as fail" in attempts[1]


def test_a_failed_cell_waiting_for_its_retry_is_not_done() -> None:
    clock = Clock()
    view, _ = progress(clock, 1, retries=1)
    (cell,) = cells(1)
    view.on_event(cell, "launched", None)
    clock.now = 5
    view.on_result(AttemptResult(cell, "r", FAIL, Slot((0,), 1), True))
    assert view.done == 0 and view.attempts_left() == 1
    assert view.eta_s() == pytest.approx(5.0)


def test_a_resumed_sweep_counts_what_ran_before() -> None:
    clock = Clock()
    out = io.StringIO()
    view = SweepProgress(Console(file=out, width=200), retries=1, clock=clock)
    view.seed({"c0": [PASS], "c1": [FAIL, FAIL], "c2": [FAIL]})
    view.on_plan(Preflight([CellPlan(c, ("--x",)) for c in cells(4)], {}, {}))
    # c0 and c1 are done; c2 still owes its retry, c3 its first attempt.
    assert view.done == 2 and dict(view.counts) == {"pass": 1, "fail": 2}
    assert view.attempts_left() == pytest.approx(1 + 1 + 2 / 3)


def test_counts_and_done_follow_the_retry_rule_of_the_scheduler() -> None:
    """The view asks the table's and the scheduler's own rules (row_status, decide_after), not copies of them."""
    clock = Clock()
    view, out = progress(clock, 3, retries=1)
    nan, raced, rejected = cells(3)
    # A NaN, then a retry the host spoiled: the row shows the NaN, and the cell's one retry is used.
    # A port race is relaunched without using the retry; a rejected flag is never retried (deterministic).
    for cell, verdict in ((nan, FAIL), (nan, INFRA), (raced, PORT_RACE), (raced, PASS), (rejected, REJECTED)):
        view.on_event(cell, "launched", None)
        clock.now += 2
        view.on_result(AttemptResult(cell, "r", verdict, Slot((0,), 1), True))
    assert dict(view.counts) == {"fail": 2, "pass": 1}
    assert view.done == 3 and view.attempts_left() == 0
    lines = out.getvalue().splitlines()
    assert any(line.startswith("* x=0 (retry 1 of 1): infra") for line in lines), lines
    assert any(line.startswith("* x=1 (relaunched on another port): pass") for line in lines), lines
