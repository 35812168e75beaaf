"""The heat-map coloured by speed (`report --html FILE --colour speed`). Pure.

Passing cells with a valid speed take a shade from light (the slowest measured) to deep green (the fastest),
by their median output tokens/s; every other cell keeps the colour of its verdict, so the failures still
show where they are. The legend gives the two ends of the scale in tokens/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.model import Status
from orchestrator.probe.speed import band_of
from orchestrator.report.heatmap import Palette, _text_on, palette_of
from orchestrator.store.results import CellResult

SLOWEST = (0xE5, 0xF5, 0xE0)
FASTEST = (0x00, 0x5A, 0x32)


def _shade(fraction: float) -> str:
    red, green, blue = (round(s + (f - s) * fraction) for s, f in zip(SLOWEST, FASTEST, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"


def _median(result: CellResult) -> float | None:
    band = band_of(result.speed) if result.status is Status.PASS and not result.flaky else None
    return None if band is None else band.median


@dataclass(frozen=True)
class SpeedPalette(Palette):
    """The verdict palette, with a shade of green per measured passing cell (cell id -> colours)."""

    shades: dict[str, tuple[str, str]] = field(default_factory=dict)
    scale: tuple[tuple[str, tuple[str, str]], ...] = ()
    """The legend's ends: (`slowest 700 tok/s`, colours), (`fastest 1000 tok/s`, colours)."""

    def of(self, result: CellResult) -> tuple[str, str]:
        """A measured passing cell's shade, else its verdict's colours."""
        return self.shades.get(result.cell.cell_id) or super().of(result)

    def sub(self, result: CellResult) -> str | None:
        """The small text of a measured passing cell on the map: its median tokens/s."""
        median = _median(result)
        return None if median is None else f"{median:.0f} tok/s"


def speed_palette(results: Sequence[CellResult]) -> SpeedPalette:
    """Colours by speed for these results (the verdict palette where nothing was measured)."""
    medians = {r.cell.cell_id: m for r in results if (m := _median(r)) is not None}
    base = palette_of(results)
    if not medians:
        return SpeedPalette(base.colours)
    low, high = min(medians.values()), max(medians.values())
    shades = {}
    for cell_id, median in medians.items():
        colour = _shade((median - low) / (high - low) if high > low else 1.0)
        shades[cell_id] = (colour, _text_on(colour))
    ends = (("slowest", low, _shade(0.0)), ("fastest", high, _shade(1.0)))
    scale = tuple((f"{name} {value:.0f} tok/s", (c, _text_on(c))) for name, value, c in ends)
    return SpeedPalette(base.colours, shades, scale if high > low else scale[1:])
