"""Adaptive localisation on a 648-cell space: one pair and one single value found from a tenth of it."""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.matrix.covering import covering_cells
from orchestrator.planning.localise import Observed, candidates, confirmed, cover_cells, next_cells, unexplained
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
        nxt = (next_cells(AXES, CELLS, observed) or cover_cells(AXES, CELLS, observed))[: budget - len(observed)]
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


def _masked_truth(pair: dict[str, str], single: dict[str, str]):  # type: ignore[no-untyped-def]
    """The single fails earlier (its category wins), so a cell holding both shows only the single."""

    def outcome(cell: dict[str, str]) -> str:
        if all(cell[k] == v for k, v in single.items()):
            return "kernel_not_supported_on_arch"
        if all(cell[k] == v for k, v in pair.items()):
            return "nan_in_probs"
        return "pass"

    return outcome


@settings(max_examples=25, deadline=None)
@given(
    names=st.lists(st.sampled_from(list(AXES)), min_size=3, max_size=3, unique=True),
    picks=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
)
def test_pair_and_single_on_other_axes_both_confirmed_even_when_one_hides_the_other(
    names: list[str], picks: tuple[int, int, int]
) -> None:
    value = {n: AXES[n][p % len(AXES[n])] for n, p in zip(names, picks, strict=True)}
    pair, single = {n: value[n] for n in names[:2]}, {names[2]: value[names[2]]}
    observed = _localise(_masked_truth(pair, single), budget=64)
    sure = confirmed(observed, list(AXES))
    assert sure.get("nan_in_probs") == {frozenset(pair.items())}
    assert sure.get("kernel_not_supported_on_arch") == {frozenset(single.items())}
    assert unexplained(observed, list(AXES)) == {}
    assert len(observed) <= 64


def test_a_single_is_not_preferred_to_a_pair_it_never_failed_without() -> None:
    # Every failing cell so far holds both a=1 and d=v; a=1 passed elsewhere, d=v never did: d=v alone and
    # the pair (a=1, d=v) explain the same cells, so neither is confirmed until a cell with d=v and a!=1 runs.
    failing = {**CELLS[0], "a": "1", "d": "v"}
    passing = [{**failing, "d": "u"}, {**failing, "a": "2", "d": "u"}]
    observed = [Observed(failing, "nan_in_probs"), *(Observed(p, "pass") for p in passing)]
    left = candidates(observed, list(AXES))["nan_in_probs"]
    assert frozenset({("d", "v")}) in left and frozenset({("a", "1"), ("d", "v")}) in left
    assert frozenset({("a", "1"), ("d", "v")}) not in confirmed(observed, list(AXES)).get("nan_in_probs", set())
    nxt = next_cells(AXES, CELLS, observed)
    assert nxt and CELLS[nxt[0]]["d"] == "v" and CELLS[nxt[0]]["a"] != "1"


def test_an_ambiguity_no_cell_can_resolve_stops_early_and_stays_unconfirmed() -> None:
    # f has two values and f=g always fails first: e=n alone and (e=n, f=h) hold in exactly the same testable
    # cells. Nothing can tell them apart, so localisation names both and stops instead of spending the budget.
    observed = _localise(_masked_truth({"f": "h", "e": "n"}, {"f": "g"}), budget=64)
    assert len(observed) < 48
    assert "nan_in_probs" not in confirmed(observed, list(AXES))
    left = unexplained(observed, list(AXES))["nan_in_probs"]
    assert {frozenset({("e", "n")}), frozenset({("e", "n"), ("f", "h")})} <= left
