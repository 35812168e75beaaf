"""Pure: what an adaptive sweep's cells prove about each failure category, as `explain` reports it.

The same candidate logic the sweep used to pick its cells (sweep/localise.py), run again on the
stored verdicts: a cause is confirmed when it is the only candidate left in one of its category's
failing cells (every other single value and pair that cell holds also occurs in a passing cell);
what is left unconfirmed is listed, with why the sweep stopped before it could tell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.matrix.flags import canonical_name
from orchestrator.model import FlagValue, Status
from orchestrator.planning.localise import PASS, Cause, Observed, cause_text, confirmed, unexplained

INSTALL = "install"
STOPS = {
    "budget": "the budget of launched cells ran out",
    "stuck": "no valid cell was left that could split them",
    "stopped": "the sweep stopped after an infra failure",
    "explained": "the sweep ended",
}


@dataclass(frozen=True)
class Localisation:
    """Per category: the confirmed causes, and the candidates still in doubt (best known first)."""

    confirmed: dict[str, list[Cause]]
    remaining: dict[str, list[Cause]]
    values: dict[tuple[str, str], FlagValue]
    """(flag, value as text) -> the value as the cells hold it (for findings built from a cause)."""
    stop: str

    def why_left(self) -> str:
        """Why candidates were left: the sweep's stop reason."""
        return STOPS.get(self.stop, "the sweep was interrupted")

    def flags_of(self, cause: Cause) -> dict[str, FlagValue]:
        """A cause as flag -> value."""
        return {name: self.values.get((name, text), text) for name, text in sorted(cause)}

    def confirmed_flags(self, category: str) -> list[dict[str, tuple[FlagValue, ...]]]:
        """The category's confirmed causes as flag -> values, causes that differ in one flag's value merged:
        `fp8-gemm-backend=auto` and `=deep_gemm` read as `fp8-gemm-backend in {auto, deep_gemm}`."""
        merged: list[dict[str, set[FlagValue]]] = [
            {name: {value} for name, value in self.flags_of(cause).items()}
            for cause in self.confirmed.get(category, [])
        ]
        changed = True
        while changed:
            changed = False
            for i, j in combinations(range(len(merged)), 2):
                a, b = merged[i], merged[j]
                differ = [n for n in a if a[n] != b.get(n)]
                if a.keys() == b.keys() and len(differ) == 1:
                    a[differ[0]] |= b[differ[0]]
                    del merged[j]
                    changed = True
                    break
        return [{n: tuple(sorted(v, key=str)) for n, v in sorted(m.items())} for m in merged]


def _values(cell: CellOutcome, with_install: bool) -> dict[str, FlagValue]:
    flags = cell.canonical_flags
    values: dict[str, FlagValue] = {name: flags.get(name) for name in map(canonical_name, cell.axes)}
    if with_install:
        values[INSTALL] = cell.install
    return values


def _text(value: FlagValue) -> str:
    return "" if value is None or value is False else str(value)


def localisation(view: SweepView, group_of: Callable[[CellOutcome], str], stop: str | None) -> Localisation:
    """Confirmed and remaining causes per failure category, from the view's clean verdicts."""
    with_install = len(view.installs) > 1
    observed: list[Observed] = []
    values: dict[tuple[str, str], FlagValue] = {}
    axes: list[str] = []
    for cell in view.cells:
        if cell.flaky or cell.status not in (Status.PASS, Status.FAIL, Status.INVALID):
            continue
        held = _values(cell, with_install)
        for name, value in held.items():
            values[(name, _text(value))] = value
            if name not in axes:
                axes.append(name)
        outcome = PASS if cell.status is Status.PASS else group_of(cell)
        observed.append(Observed({n: _text(v) for n, v in held.items()}, outcome))
    sure = confirmed(observed, axes)
    left = unexplained(observed, axes)
    return Localisation(
        {cat: sorted(causes, key=cause_text) for cat, causes in sure.items()},
        {cat: _by_support(causes, observed, cat) for cat, causes in left.items()},
        values,
        stop or "interrupted",
    )


def _by_support(causes: set[Cause], observed: Sequence[Observed], category: str) -> list[Cause]:
    """Candidates held by the most failing cells of the category first; fewer values first on a tie."""

    def support(cause: Cause) -> int:
        return sum(o.outcome == category and cause <= frozenset(o.values.items()) for o in observed)

    return sorted(causes, key=lambda c: (-support(c), len(c), cause_text(c)))
