"""The pairwise covering subset: every coverable pair covered, only valid cells, prior runs count."""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.matrix.cost import Estimate, default_strategy
from orchestrator.matrix.covering import covering_cells, pairs_of
from orchestrator.planning.strategy import LaunchCost
from tests.plan_axes import AXES


def _cells(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    return [dict(zip(axes, v, strict=True)) for v in product(*axes.values())]


def _covers(axes: dict[str, list[str]], valid: list[dict[str, str]], chosen: list[int]) -> bool:
    need = set().union(*(pairs_of(c, list(axes)) for c in valid))
    got = set().union(*(pairs_of(valid[i], list(axes)) for i in chosen)) if chosen else set()
    return need <= got


def test_648_cells_are_covered_by_a_few_dozen() -> None:
    cells = _cells(AXES)
    chosen = covering_cells(AXES, cells)
    assert len(cells) == 648
    assert 12 <= len(chosen) <= 40
    assert len(set(chosen)) == len(chosen)
    assert _covers(AXES, cells, chosen)


def test_excluded_and_rejected_cells_are_never_chosen() -> None:
    cells = [c for c in _cells(AXES) if not (c["a"] == "1" and c["b"] == "x") and c["c"] != "s"]
    chosen = covering_cells(AXES, cells)
    assert _covers(AXES, cells, chosen)
    assert all(not (cells[i]["a"] == "1" and cells[i]["b"] == "x") for i in chosen)


def test_cells_already_run_count_as_covered() -> None:
    cells = _cells(AXES)
    first = [cells[i] for i in covering_cells(AXES, cells)]
    assert covering_cells(AXES, cells, already_run=first) == []


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    drop=st.sets(st.integers(0, 80), max_size=20),
)
def test_any_valid_subset_is_covered(sizes: list[int], drop: set[int]) -> None:
    axes = {f"k{i}": [f"v{j}" for j in range(n)] for i, n in enumerate(sizes)}
    cells = [c for i, c in enumerate(_cells(axes)) if i not in drop]
    chosen = covering_cells(axes, cells)
    assert all(0 <= i < len(cells) for i in chosen)
    if len(axes) >= 2 and cells:
        assert _covers(axes, cells, chosen)


def test_default_strategy_and_estimate_text() -> None:
    assert default_strategy(64) == "full"
    assert default_strategy(65) == "adaptive"
    past = Estimate(10, 600.0, "past runs (3)")
    assert past.text() == "10 cells, about 1.7 h (per cell 600 s, from past runs (3))"
    cold = Estimate(100, 3600.0, "deadlines", parallel=2)
    assert cold.hours == 50 and "2 at a time" in cold.text()
    assert cold.hours > 12 > past.hours  # `sweep` asks before a night above --max-hours (cli/sweep_plan.py)


def test_estimate_of_no_cell_and_of_one() -> None:
    # An all-invalid matrix launches nothing: no minute of it, and one cell is one cell.
    assert Estimate(0, 600.0, "deadlines").text() == "no cells (nothing to launch)"
    assert Estimate(1, 600.0, "deadlines").text() == "1 cell, about 10 min (per cell 600 s, from deadlines)"
    one = LaunchCost.of(1, "full", True, ["c1"], 0, (), None, Estimate(1, 60.0, "deadlines"))
    assert one.text() == (
        "1 cell; strategy full (the default for this size): "
        "launches 1 cell, about 1 min (per cell 60 s, from deadlines)"
    )
