"""Speed regressions across sweeps and the flag values that move throughput, beyond the noise (pure)."""

from __future__ import annotations

import json

from orchestrator.analysis.compare import compare
from orchestrator.analysis.explain import explain
from orchestrator.analysis.inputs import CellOutcome
from orchestrator.analysis.render import render_comparison, render_explanation
from orchestrator.analysis.speed import speed_effects
from orchestrator.probe.speed import Band
from tests.analysis.test_inputs import PASS, matrix, view

AXES = {"attention-backend": ["fa3", "triton"], "cuda-graph-max-bs": ["8", "16"]}


def _cells() -> list[CellOutcome]:
    return matrix(AXES, lambda flags: (PASS, ()))


def _band(median: float, noise: float = 0.02) -> Band:
    return Band(median, median * (1 - noise), median * (1 + noise))


def test_a_ten_percent_slowdown_is_a_regression_and_a_change_in_the_noise_is_not() -> None:
    before_cells, after_cells = _cells(), _cells()
    ids = [c.cell_id for c in before_cells]
    before = {i: _band(1000.0) for i in ids}
    after = {ids[0]: _band(900.0), ids[1]: _band(1010.0), ids[2]: _band(1150.0), ids[3]: _band(1000.0)}
    result = compare(view(before_cells), view(after_cells, sweep_id="s2"), speeds=(before, after))
    assert [c.cell_id for c in result.speed_regressions] == [ids[0]]
    assert [c.cell_id for c in result.speed_improvements] == [ids[2]]
    data = json.loads(render_comparison(result, "json"))
    regression = data["speed_regressions"][0]
    assert regression["cell_id"] == ids[0] and regression["change"] == -0.1
    assert regression["before"] == {"median": 1000.0, "min": 980.0, "max": 1020.0}
    assert regression["after"]["median"] == 900.0 and data["speed_improvements"][0]["change"] == 0.15
    term = render_comparison(result, "term", width=140)
    assert "speed, output tok/s" in term and "-10.0% (slower)" in term and "+15.0% (faster)" in term
    assert "no change in the" not in term
    assert "#### Speed" in render_comparison(result, "md")


def test_no_speeds_no_speed_lists() -> None:
    data = compare(view(_cells()), view(_cells(), sweep_id="s2")).to_dict()
    assert data["speed_regressions"] == [] and data["speed_improvements"] == []


def test_explain_names_the_flag_value_that_moves_throughput_beyond_the_noise() -> None:
    cells = _cells()
    speeds = {}
    for c in cells:
        fast = c.flags["attention-backend"] == "fa3"
        # cuda-graph-max-bs moves the speed by 1%: inside the noise.
        speeds[c.cell_id] = _band((1250.0 if fast else 1000.0) * (1.01 if c.flags["cuda-graph-max-bs"] == "16" else 1))
    effects = speed_effects(view(cells), speeds)
    assert [(e.flag, e.value, e.versus, e.pairs) for e in effects] == [("attention-backend", "fa3", "triton", 2)]
    assert effects[0].text == "attention-backend=fa3 is 25% faster than triton (2 of 2 matched pairs beyond the noise)"
    explained = explain(view(cells), speeds=speeds)
    assert explained.to_dict()["speed_effects"][0]["ratio"] == 1.25
    assert "attention-backend=fa3 is 25% faster than triton" in render_explanation(explained, "term", width=160)
    assert "**speed**: attention-backend=fa3 is 25% faster" in render_explanation(explained, "md")


def test_a_difference_in_one_pair_only_is_not_an_effect() -> None:
    cells = _cells()
    speeds = {c.cell_id: _band(1000.0) for c in cells}
    first_fa3 = next(c for c in cells if c.flags["attention-backend"] == "fa3")
    speeds[first_fa3.cell_id] = _band(1300.0)
    effects = speed_effects(view(cells), speeds)
    assert all(e.flag != "attention-backend" for e in effects)


def test_explain_says_when_no_flag_value_moves_the_speed() -> None:
    cells = _cells()
    explained = explain(view(cells), speeds={c.cell_id: _band(1000.0) for c in cells})
    assert explained.speed_effects == () and explained.to_dict()["speed_measured"] == 4
    line = "no flag value moves output tok/s beyond the noise (4 measured passing cells)"
    assert line in render_explanation(explained, "term", width=160) and line in render_explanation(explained, "md")
    assert "output tok/s" not in render_explanation(explain(view(cells)), "term")  # nothing measured: nothing said
