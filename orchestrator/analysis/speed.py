"""Speed across cells and sweeps: which changes are beyond the noise. Pure: bands in, findings out.

`speed_changes`: a matched cell passing in both sweeps whose output tokens/s moved beyond both sweeps' noise
bands (probe/speed.py `beyond_noise`) is a speed regression or improvement; inside the bands it is the same
speed, however the medians read.

`speed_effects`: which flag values move throughput. Cells are compared in matched pairs that differ in one
flag only (all other flags, the install and the host equal), so a value is never credited with another
flag's effect; a value is reported when it is faster than another value of its flag beyond the noise in
every pair that compares them.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.matrix.flags import canonical_name
from orchestrator.model import Status
from orchestrator.probe.speed import Band, beyond_noise, change

Speeds = Mapping[str, Band]
"""Cell id -> the output tokens/s band of its passing run (cells without a valid speed are absent)."""


def _band_dict(band: Band) -> dict[str, float]:
    return {"median": band.median, "min": band.low, "max": band.high}


@dataclass(frozen=True)
class SpeedChange:
    """A matched cell whose speed moved beyond both sweeps' noise bands."""

    cell_id: str
    label: str
    before: Band
    after: Band

    @property
    def change(self) -> float:
        """Relative change of the median output tokens/s (-0.1: 10% slower)."""
        return change(self.before, self.after)

    def to_dict(self) -> dict[str, Any]:
        """`{cell_id, before, after, change}` of `compare --format json` (output tok/s bands; change a fraction)."""
        return {
            "cell_id": self.cell_id,
            "label": self.label,
            "before": _band_dict(self.before),
            "after": _band_dict(self.after),
            "change": round(self.change, 4),
        }


def speed_changes(
    pairs: Iterable[tuple[CellOutcome, CellOutcome]], before: Speeds, after: Speeds
) -> tuple[tuple[SpeedChange, ...], tuple[SpeedChange, ...]]:
    """(regressions, improvements) among matched cells that pass with a valid speed on both sides."""
    slower: list[SpeedChange] = []
    faster: list[SpeedChange] = []
    for a, b in pairs:
        if a.status is not Status.PASS or b.status is not Status.PASS:
            continue
        was, now = before.get(a.cell_id), after.get(b.cell_id)
        if was is None or now is None or not beyond_noise(was, now):
            continue
        found = SpeedChange(b.cell_id, b.label, was, now)
        (slower if found.change < 0 else faster).append(found)
    slower.sort(key=lambda c: c.change)
    faster.sort(key=lambda c: -c.change)
    return tuple(slower), tuple(faster)


@dataclass(frozen=True)
class SpeedEffect:
    """A flag value faster than another value of the same flag, with every other flag equal."""

    flag: str
    value: str
    versus: str
    pairs: int
    """Matched pairs of passing cells that compare the two values."""
    ratio: float
    """Median over the pairs of (median tok/s with `value`) / (with `versus`)."""

    @property
    def text(self) -> str:
        """`attention-backend=fa3 is 25% faster than triton (3 of 3 matched pairs beyond the noise)`."""
        return (
            f"{self.flag}={self.value} is {self.ratio - 1:.0%} faster than {self.versus} "
            f"({self.pairs} of {self.pairs} matched pairs beyond the noise)"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "flag": self.flag,
            "value": self.value,
            "versus": self.versus,
            "pairs": self.pairs,
            "ratio": round(self.ratio, 4),
            "text": self.text,
        }


def _context(cell: CellOutcome, flag: str) -> tuple[Any, ...]:
    """Everything about a cell but `flag`: two cells with the same context differ in that flag alone."""
    others = tuple(sorted((k, str(v)) for k, v in cell.canonical_flags.items() if k != flag))
    return (cell.install, cell.host, others)


def speed_effects(view: SweepView, speeds: Speeds) -> tuple[SpeedEffect, ...]:
    """Flag values that move throughput beyond the noise, largest effect first."""
    measured = [c for c in view.cells if c.status is Status.PASS and not c.flaky and c.cell_id in speeds]
    axes = list(dict.fromkeys(canonical_name(a) for c in measured for a in c.axes))
    effects: list[SpeedEffect] = []
    for flag in (a for a in axes if a != "install"):
        by_context: dict[tuple[Any, ...], dict[str, Band]] = defaultdict(dict)
        for cell in measured:
            value = cell.canonical_flags.get(flag)
            by_context[_context(cell, flag)][str(value) if value is not None else "(unset)"] = speeds[cell.cell_id]
        compared: dict[tuple[str, str], list[tuple[Band, Band]]] = defaultdict(list)
        for values in by_context.values():
            for value, band in values.items():
                for other, other_band in values.items():
                    if other != value:
                        compared[(value, other)].append((band, other_band))
        for (value, other), bands in compared.items():
            if all(beyond_noise(o, v) and v.median > o.median for v, o in bands):
                ratio = statistics.median(v.median / o.median for v, o in bands)
                effects.append(SpeedEffect(flag, value, other, len(bands), ratio))
    return tuple(sorted(effects, key=lambda e: (-e.ratio, e.flag, e.value, e.versus)))
