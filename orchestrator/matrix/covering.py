"""Pure: a strength-2 covering subset of a matrix's valid cells (`sweep --strategy pairwise`).

The array itself comes from covertable (a maintained covering-array library) over the matrix's
axes. Its rows are then mapped back onto the cells that exist: a row that exclude removed, or that
preflight rejected, is dropped, and every value pair that some valid cell holds but no chosen row
covers is filled in greedily from the valid cells. Cells already run (in this store) count as
covered, so a second pairwise sweep only adds what the first did not cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

import covertable

from orchestrator.model import FlagValue

Assignment = Mapping[str, FlagValue]
Pair = tuple[tuple[str, str], tuple[str, str]]


def _key(value: FlagValue) -> str:
    return "" if value is None or value is False else str(value)


def pairs_of(cell: Assignment, axes: Sequence[str]) -> set[Pair]:
    """Every value pair a cell holds on the given axes (names in axis order)."""
    items = [(name, _key(cell.get(name))) for name in axes]
    return {(a, b) for a, b in combinations(items, 2)}


def _row_key(cell: Assignment, axes: Sequence[str]) -> tuple[str, ...]:
    return tuple(_key(cell.get(name)) for name in axes)


def covering_cells(
    axes: Mapping[str, Sequence[FlagValue]],
    valid: Sequence[Assignment],
    already_run: Iterable[Assignment] = (),
) -> list[int]:
    """Indices into `valid` of cells that, with `already_run`, cover every pair some valid cell holds.

    Deterministic for the same inputs; order is the library's row order, then the greedy fill-in.
    """
    names = list(axes)
    if len(names) < 2:
        done = {_row_key(c, names) for c in already_run}
        return [i for i, c in enumerate(valid) if _row_key(c, names) not in done]
    needed: set[Pair] = set().union(*(pairs_of(c, names) for c in valid)) if valid else set()
    covered: set[Pair] = set()
    for cell in already_run:
        covered |= pairs_of(cell, names)
    by_key = {_row_key(c, names): i for i, c in reversed(list(enumerate(valid)))}
    factors = {name: [_key(v) for v in values] for name, values in axes.items()}
    chosen: list[int] = []
    for row in covertable.make(factors, strength=2):
        index = by_key.get(tuple(str(row[name]) for name in names))
        if index is None or index in chosen:
            continue
        new = pairs_of(valid[index], names) - covered
        if new & needed:
            chosen.append(index)
            covered |= new
    while needed - covered:
        gains = [(len((pairs_of(c, names) & needed) - covered), -i) for i, c in enumerate(valid)]
        gain, neg = max(gains)
        if gain == 0:
            break
        chosen.append(-neg)
        covered |= pairs_of(valid[-neg], names)
    return chosen
