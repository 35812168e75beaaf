"""The speed object's figures and the noise band: pure functions."""

from __future__ import annotations

import pytest

from orchestrator.probe.speed import (
    Band,
    RepeatFigures,
    band_of,
    beyond_noise,
    change,
    measured,
    not_measured,
    percentile,
    speed_text,
)

LOAD = {"requests": 4, "concurrency": 2, "input_len": 8, "output_len": 10, "repeat": 3}


def test_percentile_interpolates_as_numpy() -> None:
    assert percentile([1.0], 99) == 1.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([float(i) for i in range(101)], 99) == pytest.approx(99.0)
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_measured_takes_the_median_and_the_band_of_the_repeats() -> None:
    repeats = [
        RepeatFigures(2.0, 4, 40, (0.1, 0.2), (0.01, 0.03)),
        RepeatFigures(1.0, 4, 40, (0.1,), (0.02,)),
        RepeatFigures(4.0, 4, 40, (0.3,), (0.05,)),
    ]
    speed = measured(repeats, LOAD, 0.25)
    assert speed["valid"] is True and speed["why"] is None
    assert speed["output_tok_s"] == {"median": 20.0, "min": 10.0, "max": 40.0}
    assert speed["request_s"] == {"median": 2.0, "min": 1.0, "max": 4.0}
    assert speed["ttft_ms"]["p50"] == pytest.approx(150.0) and speed["itl_ms"]["p50"] == pytest.approx(25.0)
    assert band_of(speed) == Band(20.0, 10.0, 40.0) and speed_text(speed) == "20 ± 15"


def test_an_invalid_load_has_no_figure() -> None:
    speed = not_measured("3 of 4 answers did not have the 10 tokens asked", LOAD, 0.1)
    assert band_of(speed) is None and speed["output_tok_s"] is None and speed["why"].startswith("3 of 4")
    assert speed_text(speed) == "invalid" and speed_text(None) == "-"


def test_a_ten_percent_slowdown_is_beyond_the_noise_and_a_small_change_is_not() -> None:
    before = Band(1000.0, 975.0, 1020.0)
    slower = Band(900.0, 880.0, 915.0)
    assert beyond_noise(before, slower) and change(before, slower) == pytest.approx(-0.1)
    assert beyond_noise(slower, before)  # and back: an improvement
    inside = Band(990.0, 965.0, 1010.0)  # bands overlap
    assert not beyond_noise(before, inside)
    # Bands apart but the medians within the noise floor: the same speed.
    tight_before, tight_after = Band(1000.0, 999.0, 1001.0), Band(985.0, 984.0, 986.0)
    assert not beyond_noise(tight_before, tight_after)
