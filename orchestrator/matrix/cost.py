"""Pure: which strategy a sweep uses by default, and what its launches will cost in wall time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Strategy = Literal["full", "pairwise", "adaptive"]
FULL_UP_TO = 64
"""Matrices up to this many cells run whole by default; larger ones adaptively."""
DEFAULT_MAX_HOURS = 12.0


def default_strategy(matrix_cells: int) -> Strategy:
    """`full` up to FULL_UP_TO cells, `adaptive` above."""
    return "full" if matrix_cells <= FULL_UP_TO else "adaptive"


@dataclass(frozen=True)
class Estimate:
    """The cells a sweep will launch and how long they will take, with where the per-cell figure came from."""

    cells: int
    per_cell_s: float
    source: str
    """`past runs (N)` or `deadlines`."""
    parallel: int = 1

    @property
    def hours(self) -> float:
        """Estimated wall time in hours."""
        return self.cells * self.per_cell_s / max(1, self.parallel) / 3600

    def text(self) -> str:
        """`30 cells, about 2.5 h (per cell 600 s, from past runs (12))`; under an hour in minutes."""
        if self.cells == 0:  # every cell invalid or known bad: "about 1 min" would be a minute of nothing
            return "no cells (nothing to launch)"
        took = f"{self.hours:.1f} h" if self.hours >= 1 else f"{max(1, round(self.hours * 60))} min"
        packed = f", {self.parallel} at a time" if self.parallel > 1 else ""
        cells = f"{self.cells} cell{'s' * (self.cells != 1)}"
        return f"{cells}, about {took} (per cell {self.per_cell_s:.0f} s{packed}, from {self.source})"

