"""Pure adaptive fault localisation: which single values and value pairs can still cause each failure.

A candidate cause of category C is one value (`a=x`) or a pair of values (`a=x, b=y`). It survives
while it is held by some cell that failed with C and by no cell that passed (a pass clears every
candidate it holds); a pair is set aside while one of its values survives on its own and has failed
with C without the pair's other value. A failing
cell needs at least one cause, so a candidate that is the only survivor in some failing cell is
`confirmed`. The next cells to launch change one suspected value of a failing cell at a time, to a
value that introduces no new suspects where one exists, keeping the rest as they were (never to a
cell holding a confirmed cause, which would only fail for it again): a pass clears what it holds, a
failure is a smaller failing cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

Cause = frozenset[tuple[str, str]]
PASS = "pass"


@dataclass(frozen=True)
class Observed:
    """One cell with a verdict: its axis values and `pass`, a failure category, or `other` (no evidence)."""

    values: Mapping[str, str]
    outcome: str


def causes_in(values: Mapping[str, str], axes: Sequence[str]) -> set[Cause]:
    """Every single value and value pair the cell holds."""
    items = [(name, values[name]) for name in axes if name in values]
    return {frozenset([i]) for i in items} | {frozenset(p) for p in combinations(items, 2)}


def _alive(
    values: Mapping[str, str], axes: Sequence[str], cleared: set[Cause], failed: Sequence[Observed] = ()
) -> set[Cause]:
    """The cell's surviving causes; a pair is left out while one of its values survives alone and has
    failed (in `failed`, the category's failing cells) without the pair's other value: the single explains
    those cells and the pair adds nothing (parsimony). Until then the pair is as likely, and is kept."""
    alive = causes_in(values, axes) - cleared
    singles = {item for c in alive if len(c) == 1 for item in c}
    held = [frozenset(o.values.items()) for o in failed]

    def hidden(pair: Cause) -> bool:
        for single in pair & singles:
            other = next(iter(pair - {single}))
            if any(single in cell and other not in cell for cell in held):
                return True
        return False

    return {c for c in alive if len(c) == 1 or not hidden(c)}


def _cleared(observed: Sequence[Observed], axes: Sequence[str]) -> set[Cause]:
    out: set[Cause] = set()
    for o in observed:
        if o.outcome == PASS:
            out |= causes_in(o.values, axes)
    return out


def _failing(observed: Sequence[Observed]) -> dict[str, list[Observed]]:
    groups: dict[str, list[Observed]] = {}
    for o in observed:
        if o.outcome not in (PASS, "other"):
            groups.setdefault(o.outcome, []).append(o)
    return groups


def candidates(observed: Sequence[Observed], axes: Sequence[str]) -> dict[str, set[Cause]]:
    """Category -> the causes held by one of its failing cells and by no passing cell."""
    cleared = _cleared(observed, axes)
    return {
        cat: set().union(*(_alive(o.values, axes, cleared, cells) for o in cells))
        for cat, cells in _failing(observed).items()
    }


def confirmed(observed: Sequence[Observed], axes: Sequence[str]) -> dict[str, set[Cause]]:
    """Category -> the causes that are the only survivor in one of its failing cells."""
    cleared = _cleared(observed, axes)
    found: dict[str, set[Cause]] = {}
    for cat, cells in _failing(observed).items():
        for cell in cells:
            alive = _alive(cell.values, axes, cleared, cells)
            if len(alive) == 1:
                found.setdefault(cat, set()).update(alive)
    return found


def next_cells(
    axes: Mapping[str, Sequence[str]], valid: Sequence[Mapping[str, str]], observed: Sequence[Observed]
) -> list[int]:
    """Indices into `valid` to launch next (one per category still unexplained); [] when done or stuck."""
    names = list(axes)
    cleared = _cleared(observed, names)
    done = {tuple(o.values.get(n) for n in names) for o in observed}
    index = {tuple(c.get(n) for n in names): i for i, c in enumerate(valid)}
    sure = confirmed(observed, names)
    # A cell holding a confirmed cause fails for it again and tells nothing about the suspects it splits.
    masking: set[Cause] = set().union(*sure.values()) if sure else set()
    picked: list[int] = []
    for cat, cells in sorted(_failing(observed).items()):
        open_cells = []
        for cell in cells:
            alive = _alive(cell.values, names, cleared, cells)
            if alive and not any(c <= frozenset(cell.values.items()) for c in sure.get(cat, ())):
                open_cells.append((len(alive), sorted(map(sorted, alive)), cell, alive))
        if open_cells and _stuck(set.intersection(*(t[3] for t in open_cells)), names, valid, done, masking):
            continue
        best: tuple[tuple[int, int, int, int], int] | None = None
        for _, _, cell, alive in sorted(open_cells, key=lambda t: (t[0], t[1])):
            for position, name in enumerate(names):
                for order, value in enumerate(axes[name]):
                    if value == cell.values.get(name):
                        continue
                    key = tuple(value if n == name else cell.values.get(n) for n in names)
                    i = index.get(key)
                    if i is None or key in done or i in picked:
                        continue
                    if any(c <= frozenset(valid[i].items()) for c in masking):
                        continue
                    held = _alive(valid[i], names, cleared, cells)
                    split = len(alive & held)
                    if split == len(alive):
                        continue
                    score = (len(held - alive), -min(split, len(alive) - split), position, order)
                    if best is None or score < best[0]:
                        best = (score, i)
            if best is not None:
                break
        if best is not None:
            picked.append(best[1])
    return picked


def _stuck(
    core: set[Cause], names: Sequence[str], valid: Sequence[Mapping[str, str]], done: set[tuple[str | None, ...]],
    masking: set[Cause],
) -> bool:
    """Whether the candidates every open failing cell shares can no longer be told apart: no cell left to run
    holds some of them but not all (a binary flag whose other value always fails earlier, say). Splitting
    the other suspects of those cells would only move the failure around."""
    if len(core) < 2:
        return False
    for cell in valid:
        if tuple(cell.get(n) for n in names) in done:
            continue
        held = frozenset(cell.items())
        if any(c <= held for c in masking):
            continue
        inside = sum(c <= held for c in core)
        if 0 < inside < len(core):
            return False
    return True


def unexplained(observed: Sequence[Observed], axes: Sequence[str]) -> dict[str, set[Cause]]:
    """Category -> the causes still in doubt: those of its failing cells that hold no confirmed cause.

    Empty for every category once each failing cell is explained by a confirmed cause.
    """
    cleared = _cleared(observed, axes)
    sure = confirmed(observed, axes)
    left: dict[str, set[Cause]] = {}
    for cat, cells in _failing(observed).items():
        for cell in cells:
            held = frozenset(cell.values.items())
            if any(c <= held for c in sure.get(cat, ())):
                continue
            left.setdefault(cat, set()).update(_alive(cell.values, axes, cleared, cells))
    return {cat: causes for cat, causes in left.items() if causes}


def cause_text(cause: Cause) -> str:
    """`attention-backend=triton and kv-cache-dtype=fp8_e4m3` (names sorted)."""
    return " and ".join(f"{name}={value}" for name, value in sorted(cause))


def untested_pairs(
    axes: Sequence[str], valid: Sequence[Mapping[str, str]], observed: Sequence[Observed]
) -> set[Cause]:
    """Value pairs of the valid cells that no verdict has tested yet, and that a launch still could.

    A pass tests every pair it holds; an unexplained failure holds its pairs as suspects. A failure
    explained by a confirmed cause tested nothing past the point it died, so its other pairs are
    untested, which is how a pair hidden behind an earlier-failing single value (the covering array
    put them in one cell) is found. Pairs that contain a confirmed cause cannot be tested at all.
    """
    by_cat = confirmed(observed, axes)
    sure: set[Cause] = set().union(*by_cat.values())
    suspects: set[Cause] = set()
    for cat, failed in _failing(observed).items():
        mine = by_cat.get(cat, set())
        for o in failed:
            if not any(c <= frozenset(o.values.items()) for c in mine):
                suspects |= causes_in(o.values, axes)
    known = _cleared(observed, axes) | suspects
    needed: set[Cause] = set()
    for values in valid:
        for cause in causes_in(values, axes):
            if len(cause) == 2 and cause not in known and not any(c <= cause for c in sure):
                needed.add(cause)
    return needed


def cover_cells(
    axes: Mapping[str, Sequence[str]], valid: Sequence[Mapping[str, str]], observed: Sequence[Observed]
) -> list[int]:
    """Indices into `valid` that test the untested pairs (greedy), avoiding every confirmed cause."""
    names = list(axes)
    needed = untested_pairs(names, valid, observed)
    if not needed:
        return []
    sure = set().union(*confirmed(observed, names).values())
    done = {tuple(o.values.get(n) for n in names) for o in observed}
    pool = []
    for i, cell in enumerate(valid):
        held = frozenset(cell.items())
        if tuple(cell.get(n) for n in names) in done or any(c <= held for c in sure):
            continue
        pool.append((i, {c for c in causes_in(cell, names) if len(c) == 2}))
    picked: list[int] = []
    while needed:
        gain, neg, pairs = max(((len(p & needed), -i, p) for i, p in pool), default=(0, 0, set()), key=lambda t: t[:2])
        if gain == 0:
            break
        picked.append(-neg)
        needed -= pairs
    return picked
