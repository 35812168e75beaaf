"""Matrix expansion: axes multiply, then exclude and include follow GitHub Actions' rules.

The rules, from GitHub's workflow-syntax documentation (see reference/peers.md 4a):
- the axes multiply in key order, the first axis varying slowest;
- an exclude entry removes every combination it matches, and it "only has to be a partial match";
- include entries are processed after exclude, top to bottom. An entry "will be added to each
  of the matrix combinations if none of the key:value pairs overwrite any of the original
  matrix values"; "the original matrix values will not be overwritten, but added matrix values
  can be overwritten"; an entry that "cannot be added to any of the matrix combinations" becomes
  a new combination, which later entries never extend. With no axes, each entry is one job.

Whether an include entry fits a combination depends only on the combination's original
values, which never change, so each combination can be finished on its own: expansion
streams, holding one combination and a flag per include entry, whatever the matrix's size.
Names and values are canonicalised first (`nsa-decode-backend` -> `dsa-decode-backend`,
`nsa` -> `dsa`), so the spelling a file uses never changes what matches or a cell's id.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import product

from orchestrator.matrix.flags import canonical_name, canonical_value, canonicalize
from orchestrator.model import AxisValue, Cell, FlagList, FlagValue, Matrix
from orchestrator.secret import masked_names

Combination = dict[str, FlagValue]


def normalized(value: FlagValue) -> bool | str | FlagList | None:
    """The form values are compared and hashed in: True (bare flag), None (omitted), the argument's text,
    or the arguments' texts for a flag given several values (hashed as a JSON list)."""
    if value is True:
        return True
    if value is False or value is None:
        return None
    if isinstance(value, FlagList):
        return FlagList(value.arguments)
    return str(value)


def cell_id(flags: Mapping[str, FlagValue], install: str | None = None, host: str | None = None) -> str:
    """Stable id of a launch: 10 hex of sha256 over its canonical flags, install name and host lane.

    `host` is set only when a pool's hosts differ and the host is an axis; without it the id is as it always was.

    Omitted flags (False/None) do not count, nor does key order or a renamed spelling.
    Environment values are not part of it. To match cells across installs (before/after
    an upgrade), compare `cell_id(cell.flags)`, which leaves the install out.
    """
    canonical = {}
    for name, value in flags.items():
        text = normalized(canonical_value(name, value))
        if text is not None:
            canonical[canonical_name(name)] = text
    key: dict[str, object] = {"flags": canonical, "install": install}
    if host:
        key["host"] = host
    payload = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class _Plan:
    names: tuple[str, ...]
    values: tuple[tuple[AxisValue, ...], ...]
    exclude: tuple[Combination, ...]
    include: tuple[Combination, ...]
    base: Combination
    axes: tuple[str, ...]
    installs: tuple[str | None, ...]
    env: dict[str, str]


def _canonical_axis_value(name: str, value: AxisValue) -> AxisValue:
    return canonicalize(value) if isinstance(value, dict) else canonical_value(name, value)


def flatten(entry: Mapping[str, AxisValue]) -> Combination:
    """An axis combination or an include/exclude entry as the flags it sets: each bundle's flags in its place.

    GitHub matches an object value by its keys; a bundle's keys are flags, so matching the flags
    themselves is the same test, and `{quant: {quantization: fp8}}` and `{quantization: fp8}` agree.
    """
    flags: Combination = {}
    for name, value in entry.items():
        if isinstance(value, dict):
            flags.update(canonicalize(value))
        else:
            flags[canonical_name(name)] = canonical_value(name, value)
    return flags


def _plan(matrix: Matrix) -> _Plan:
    axes = {
        canonical_name(k): tuple(_canonical_axis_value(k, v) for v in vs) for k, vs in matrix.axes.items()
    }
    include = tuple(flatten(entry) for entry in matrix.include)
    # The table shows flags, so a bundle axis shows as the flags its bundles set, in first-seen order.
    shown: dict[str, None] = {}
    for name, values in axes.items():
        bundles = [v for v in values if isinstance(v, dict)]
        if bundles:
            shown.update(dict.fromkeys(k for bundle in bundles for k in bundle))
        else:
            shown[name] = None
    for entry in include:
        shown.update(dict.fromkeys(k for k in entry if k not in shown))
    return _Plan(
        names=tuple(axes),
        values=tuple(axes.values()),
        exclude=tuple(flatten(entry) for entry in matrix.exclude),
        include=include,
        base=canonicalize(matrix.base_flags),
        axes=tuple(shown),
        installs=tuple(matrix.installs) or (None,),
        env=masked_names(matrix.env),
    )


def _matches(combo: Combination, entry: Combination) -> bool:
    return all(k in combo and normalized(combo[k]) == normalized(v) for k, v in entry.items())


def _fits(original: Combination, entry: Combination) -> bool:
    """GitHub's test for adding an include entry: none of its pairs overwrites an original value."""
    return all(normalized(original[k]) == normalized(v) for k, v in entry.items() if k in original)


def _combinations(plan: _Plan) -> Iterator[Combination]:
    """GitHub Actions' combinations, streamed: product, minus exclude, then include."""
    matched = [False] * len(plan.include)
    for values in product(*plan.values) if plan.names else ():
        original = flatten(dict(zip(plan.names, values, strict=True)))
        if any(_matches(original, entry) for entry in plan.exclude):
            continue
        combo = dict(original)
        for index, entry in enumerate(plan.include):
            if _fits(original, entry):
                matched[index] = True
                combo.update({k: v for k, v in entry.items() if k not in original})
        yield combo
    # Identical new combinations would be the same launch twice; GPU hours are too dear for that.
    seen: set[str] = set()
    for entry, hit in zip(plan.include, matched, strict=True):
        key = cell_id({**plan.base, **entry})
        if not hit and key not in seen:
            seen.add(key)
            yield dict(entry)


def iter_cells(matrix: Matrix) -> Iterator[Cell]:
    """The matrix's cells, lazily, in GitHub Actions' order; each install of a combination in turn."""
    plan = _plan(matrix)
    for combo in _combinations(plan):
        flags = {**plan.base, **combo}
        # Installs vary fastest so that a sweep cut short still holds before/after pairs.
        for install in plan.installs:
            yield Cell(
                cell_id=cell_id(flags, install),
                flags=dict(flags),
                axes=plan.axes,
                env=dict(plan.env),
                install=install,
            )


def expand(matrix: Matrix) -> list[Cell]:
    """Every cell of the matrix (see `iter_cells`)."""
    return list(iter_cells(matrix))


def size_bounds(matrix: Matrix) -> tuple[int, int]:
    """(lower, upper) bounds of the number of cells, computed without enumerating any."""
    plan = _plan(matrix)
    size = math.prod(len(v) for v in plan.values) if plan.names else 0
    removed = 0
    axes = dict(zip(plan.names, plan.values, strict=True))
    plain = {k for k, vs in axes.items() if not any(isinstance(v, dict) for v in vs)}
    for entry in plan.exclude:
        if not set(entry) <= plain:
            # It names a bundle's flags: how many it removes shows only by enumerating.
            removed = size
            break
        removed += math.prod(
            _count_equal(vs, entry[k]) if k in entry else len(vs) for k, vs in axes.items()
        )
    factor = len(plan.installs)
    return max(0, size - removed) * factor, (size + len(plan.include)) * factor


def _count_equal(values: tuple[AxisValue, ...], wanted: FlagValue) -> int:
    return sum(1 for v in values if not isinstance(v, dict) and normalized(v) == normalized(wanted))


def count_cells(matrix: Matrix, limit: int | None = None) -> int:
    """How many cells `expand` returns, without building them.

    With `limit`, counting stops as soon as the count is known to exceed it; the number
    returned is then only a lower bound that is above `limit`.
    """
    lower, upper = size_bounds(matrix)
    if lower == upper or (limit is not None and lower > limit):
        return lower
    plan = _plan(matrix)
    count = 0
    for _ in _combinations(plan):
        count += len(plan.installs)
        if limit is not None and count > limit:
            break
    return count
