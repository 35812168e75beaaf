"""Properties of expansion, with a literal transcription of GitHub's rules as the oracle."""

from __future__ import annotations

import random
from collections.abc import Mapping
from itertools import product
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.config.model import Matrix
from orchestrator.matrix.expand import count_cells, expand, normalized, size_bounds
from orchestrator.matrix.flags import canonical_name, canonicalize
from orchestrator.model import AxisValue, FlagValue

AXIS_NAMES = ["a", "b", "nsa-decode-backend"]
EXTRA_NAMES = ["d", "e"]
VALUES = ["x", "y", "z", "w"]


def entries(keys: list[str], min_size: int = 0) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(keys), st.sampled_from([*VALUES, "v"]), min_size=min_size, max_size=3)


@st.composite
def matrices(draw: st.DrawFn) -> Matrix:
    names = draw(st.lists(st.sampled_from(AXIS_NAMES), unique=True, max_size=3))
    axes: dict[str, Any] = {
        n: draw(st.lists(st.sampled_from(VALUES), unique=True, min_size=1, max_size=3)) for n in names
    }
    exclude: list[Any] = draw(st.lists(entries(names, min_size=1), max_size=3)) if names else []
    include: list[Any] = draw(st.lists(entries([*AXIS_NAMES, *EXTRA_NAMES]), max_size=4))
    base: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(["model-path", "tp-size", "a"]), st.sampled_from(["1", "2"]))
    )
    installs: list[str] = draw(st.sampled_from([[], ["before", "after"]]))
    return Matrix(
        name="p",
        path="p.yaml",
        text="",
        axes=axes,
        exclude=exclude,
        include=include,
        base_flags=base,
        installs=installs,
    )


def flat(entry: Mapping[str, AxisValue]) -> dict[str, FlagValue]:
    """An include/exclude entry of these generated matrices (which hold no bundles), canonicalised."""
    plain = {k: v for k, v in entry.items() if not isinstance(v, dict)}
    assert len(plain) == len(entry), entry
    return canonicalize(plain)


def oracle(m: Matrix) -> list[dict[str, Any]]:
    """GitHub's documented rules, applied literally: for each include entry, over all combinations."""
    axes = {canonical_name(k): v for k, v in m.axes.items()}
    names = list(axes)
    combos = [dict(zip(names, vs, strict=True)) for vs in product(*axes.values())] if names else []
    excludes = [flat(e) for e in m.exclude]
    combos = [c for c in combos if not any(all(c.get(k) == v for k, v in e.items()) for e in excludes)]
    originals = [dict(c) for c in combos]
    created: list[dict[str, Any]] = []
    for entry in map(flat, m.include):
        fits = [i for i, o in enumerate(originals) if all(o[k] == v for k, v in entry.items() if k in axes)]
        for i in fits:
            combos[i].update({k: v for k, v in entry.items() if k not in axes})
        if not fits and entry not in created:
            created.append(entry)
    base = canonicalize(m.base_flags)
    return [{**base, **c} for c in combos + created for _ in (m.installs or [""])]


@settings(max_examples=150, deadline=None)
@given(matrices())
def test_expansion_matches_the_documented_rules(m: Matrix) -> None:
    assert [c.flags for c in expand(m)] == oracle(m)


@settings(max_examples=150, deadline=None)
@given(matrices(), st.integers(min_value=0, max_value=40))
def test_count_matches_expansion(m: Matrix, limit: int) -> None:
    cells = expand(m)
    lower, upper = size_bounds(m)
    assert count_cells(m) == len(cells)
    assert lower <= len(cells) <= upper
    assert (count_cells(m, limit=limit) > limit) == (len(cells) > limit)


@settings(max_examples=150, deadline=None)
@given(matrices())
def test_exclude_and_include_invariants(m: Matrix) -> None:
    cells = expand(m)
    axes = {canonical_name(k): v for k, v in m.axes.items()}
    excludes = [flat(e) for e in m.exclude]
    includes = [flat(e) for e in m.include]
    base = canonicalize(m.base_flags)
    projections = [{k: c.flags.get(k) for k in axes} for c in cells]
    for values in product(*axes.values()) if axes else ():
        combo = dict(zip(axes, values, strict=True))
        excluded = any(all(combo[k] == v for k, v in e.items()) for e in excludes)
        if not excluded:
            assert combo in projections
    for cell, projection in zip(cells, projections, strict=True):
        if any(all(projection.get(k) == v for k, v in e.items()) for e in excludes):
            assert any(cell.flags == {**base, **e} for e in includes), "an excluded combination came back"


@settings(max_examples=150, deadline=None)
@given(matrices())
def test_ids_unique_per_distinct_launch(m: Matrix) -> None:
    cells = expand(m)
    launches = {
        (frozenset((k, normalized(v)) for k, v in c.flags.items() if normalized(v) is not None), c.install)
        for c in cells
    }
    assert len({c.cell_id for c in cells}) == len(launches) == len(cells)


@settings(max_examples=150, deadline=None)
@given(matrices(), st.randoms())
def test_ids_ignore_spelling_and_order(m: Matrix, rnd: random.Random) -> None:
    def respell(d: dict[str, Any]) -> dict[str, Any]:
        items = [(canonical_name(k), v) for k, v in d.items()]
        rnd.shuffle(items)
        return dict(items)

    other = Matrix(
        name="q",
        path="q.yaml",
        text="",
        axes=respell(m.axes),
        exclude=[respell(e) for e in m.exclude],
        include=[respell(e) for e in m.include],
        base_flags=respell(m.base_flags),
        installs=m.installs,
    )
    assert {c.cell_id for c in expand(m)} == {c.cell_id for c in expand(other)}
