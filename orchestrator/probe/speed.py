"""The speed a load measured, summed up and compared. Pure: numbers in, the stored `speed` object out.

The `speed` object (stored in a run's outcome, shown per passing cell in `--json-out` and `table -f json`):
`valid`, `why` (when not valid), `output_tok_s` {median, min, max} over the repeats, `request_s` (requests/s,
same), `ttft_ms` and `itl_ms` {p50, p99} over every request of every repeat, `repeats` (each one's figures),
`load` (the settings it ran with), `overhead_s` (the orchestrator's own time outside the requests) and
`waited_s` (for another cell's load to end first, probe/load.py). An invalid load stores no figure: the numbers
are null and `why` says what went wrong.

Two measurements differ beyond the noise only when their bands [min, max] over the repeats do not overlap
and the medians differ by more than NOISE_FLOOR: three repeats in one launch see less of the noise than a
second launch would (another GPU clock, another allocator state), so a gap of a few percent is never news.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NOISE_FLOOR = 0.03
"""Relative change of the medians below which two measurements are the same speed, whatever their bands."""


@dataclass(frozen=True)
class RepeatFigures:
    """One repeat of the load: how long its requests were in flight and what they gave."""

    span_s: float
    """From the first request sent to the last answer complete."""
    requests: int
    output_tokens: int
    ttfts_s: tuple[float, ...]
    itls_s: tuple[float, ...]

    @property
    def output_tok_s(self) -> float:
        """Output tokens per second of the whole server during the repeat."""
        return self.output_tokens / self.span_s if self.span_s > 0 else 0.0

    @property
    def request_s(self) -> float:
        """Requests completed per second during the repeat."""
        return self.requests / self.span_s if self.span_s > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated between the closest ranks as numpy's default does."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _band(values: Sequence[float], digits: int = 1) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def _ms(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50": round(percentile(values, 50) * 1000, 2), "p99": round(percentile(values, 99) * 1000, 2)}


def measured(repeats: Sequence[RepeatFigures], load: Mapping[str, Any], overhead_s: float) -> dict[str, Any]:
    """The `speed` object of a valid load."""
    return {
        "valid": True,
        "why": None,
        "output_tok_s": _band([r.output_tok_s for r in repeats]),
        "request_s": _band([r.request_s for r in repeats], 3),
        "ttft_ms": _ms([t for r in repeats for t in r.ttfts_s]),
        "itl_ms": _ms([t for r in repeats for t in r.itls_s]),
        "repeats": [
            {"span_s": round(r.span_s, 4), "output_tokens": r.output_tokens, "output_tok_s": round(r.output_tok_s, 1)}
            for r in repeats
        ],
        "load": dict(load),
        "overhead_s": round(overhead_s, 4),
    }


def not_measured(why: str, load: Mapping[str, Any], overhead_s: float) -> dict[str, Any]:
    """The `speed` object of a load that went wrong: no figure, and why."""
    return {
        "valid": False,
        "why": why,
        "output_tok_s": None,
        "request_s": None,
        "ttft_ms": None,
        "itl_ms": None,
        "load": dict(load),
        "overhead_s": round(overhead_s, 4),
    }


@dataclass(frozen=True)
class Band:
    """Output tokens/s of one valid measurement: the median and the band over its repeats."""

    median: float
    low: float
    high: float

    @property
    def spread(self) -> float:
        """Half the band's width: the `±` the table shows."""
        return (self.high - self.low) / 2


def band_of(speed: Mapping[str, Any] | None) -> Band | None:
    """The output tokens/s band of a stored `speed` object; None when there is no valid figure."""
    if not speed or not speed.get("valid"):
        return None
    figure = speed.get("output_tok_s")
    if not isinstance(figure, Mapping):
        return None
    try:
        return Band(float(figure["median"]), float(figure["min"]), float(figure["max"]))
    except (KeyError, TypeError, ValueError):
        return None


def change(before: Band, after: Band) -> float:
    """Relative change of the medians (-0.1: 10% slower)."""
    return (after.median - before.median) / before.median if before.median > 0 else 0.0


def beyond_noise(before: Band, after: Band) -> bool:
    """Whether `after` is faster or slower than `before` beyond both bands and the noise floor."""
    apart = after.high < before.low or after.low > before.high
    return apart and abs(change(before, after)) > NOISE_FLOOR


def speed_text(speed: Mapping[str, Any] | None) -> str:
    """`1234 ± 12` (output tok/s, median ± half the band); `invalid` for a load with no figure; `-` for none."""
    band = band_of(speed)
    if band is not None:
        return f"{band.median:.0f} ± {band.spread:.0f}"
    return "invalid" if speed else "-"
