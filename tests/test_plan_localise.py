"""Adaptive localisation on a 648-cell space: one pair and one single value found from a tenth of it."""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.matrix.covering import covering_cells
from orchestrator.sweep.localise import Observed, candidates, confirmed, next_cells
from tests.plan_axes import AXES

CELLS = [dict(zip(AXES, v, strict=True)) for v in product(*AXES.values())]


def _truth(pair: dict[str, str], single: dict[str, str]):  # type: ignore[no-untyped-def]
    def outcome(cell: dict[str, str]) -> str:
        if all(cell[k] == v for k, v in single.items()):
            return "unsupported_config"
        if all(cell[k] == v for k, v in pair.items()):
            return "nan_in_probs"
        return "pass"

    return outcome


def _localise(outcome, budget: int = 200) -> list[Observed]:  # type: ignore[no-untyped-def]
    observed = [Observed(CELLS[i], outcome(CELLS[i])) for i in covering_cells(AXES, CELLS)]
    while len(observed) < budget:
        nxt = next_cells(AXES, CELLS, observed)
        if not nxt:
            break
        observed += [Observed(CELLS[i], outcome(CELLS[i])) for i in nxt]
    return observed


def test_pair_and_single_confirmed_within_a_tenth() -> None:
    observed = _localise(_truth({"a": "1", "b": "x"}, {"c": "s"}))
    assert len(observed) <= 64
    sure = confirmed(observed, list(AXES))
    assert sure["nan_in_probs"] == {frozenset({("a", "1"), ("b", "x")})}
    assert sure["unsupported_config"] == {frozenset({("c", "s")})}
    assert len({tuple(o.values.values()) for o in observed}) == len(observed)


@settings(max_examples=20, deadline=None)
@given(
    names=st.lists(st.sampled_from(list(AXES)), min_size=2, max_size=2, unique=True),
    picks=st.tuples(st.integers(0, 3), st.integers(0, 3)),
)
def test_any_true_pair_survives_and_is_confirmed(names: list[str], picks: tuple[int, int]) -> None:
    pair = {n: AXES[n][p % len(AXES[n])] for n, p in zip(names, picks, strict=True)}
    observed = _localise(_truth(pair, {"f": "never"}))
    truth = frozenset(pair.items())
    assert truth in candidates(observed, list(AXES))["nan_in_probs"]
    assert confirmed(observed, list(AXES)).get("nan_in_probs") == {truth}
    assert len(observed) <= 64
