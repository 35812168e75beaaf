"""The scenario's `perf:` section: a launch's serving speed from its flags, and its noise seeded by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.sim import answers
from orchestrator.sim.errors import ConfigError
from orchestrator.sim.plan import make_plan
from orchestrator.sim.scenario import Scenario, load_scenario

PERF = {
    "version": "0.5.9",
    "perf": {
        "tok_s": 1000,
        "noise": 0.03,
        "rules": [
            {"when": {"attention-backend": "fa3"}, "factor": 1.25},
            {"when": {"kv-cache-dtype": "fp8_e4m3"}, "factor": 0.8},
        ],
    },
}


def test_every_matching_perf_rule_multiplies() -> None:
    scenario = Scenario.from_data(PERF)
    plain = make_plan(scenario, {"attention-backend": "triton"}, launch_number=1)
    fast = make_plan(scenario, {"attention-backend": "fa3"}, launch_number=1)
    both = make_plan(scenario, {"attention-backend": "fa3", "kv-cache-dtype": "fp8_e4m3"}, launch_number=1)
    assert plain.tok_s == 1000 and fast.tok_s == 1250 and both.tok_s == pytest.approx(1000)
    assert plain.noise == 0.03
    # The noise's seed follows the flags, not where the launch listens: the same cell draws the same noise.
    again = make_plan(scenario, {"attention-backend": "fa3", "port": "30010"}, launch_number=7)
    assert again.noise_seed == fast.noise_seed != plain.noise_seed


def test_without_perf_the_speed_is_the_timing_one() -> None:
    assert make_plan(Scenario.from_data({"version": "0.5.9"}), {}, launch_number=1).tok_s is None


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("perf: {tok_s: 0}\n", 2, "perf.tok_s"),
        ("perf: {noise: 0.1}\n", 2, "perf.tok_s: Field required"),
        ("perf:\n  tok_s: 10\n  rules:\n    - when: {attention-backend: fa9}\n      factor: 2\n", 5, "'fa9'"),
        ("perf:\n  tok_s: 10\n  rules:\n    - when: {attention-backend: fa3}\n      factor: -1\n", 6, "factor"),
    ],
)
def test_a_bad_perf_section_names_the_line(tmp_path: Path, text: str, line: int, needle: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\n" + text)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    errors = getattr(caught.value, "errors", [caught.value])
    assert any(e.line == line and needle in str(e) for e in errors), [str(e) for e in errors]


def test_ignore_eos_generates_exactly_the_tokens_asked() -> None:
    for temperature in (0.0, 0.7):
        answer = answers.generate(
            "The capital city of France is", max_new_tokens=128, temperature=temperature, seed=1, garbage=False,
            ignore_eos=True,
        )  # fmt: skip
        assert answer.completion_tokens == 128 == len(answers.split_tokens(answer.text)) and answer.finish == "length"
        assert "Paris" in answer.text
    short = answers.generate("The capital city of France is", max_new_tokens=128, temperature=0, seed=1, garbage=False)
    assert short.completion_tokens < 128 and short.finish == "stop"


def test_a_server_that_does_not_know_ignore_eos_can_be_simulated(tmp_path: Path) -> None:
    scenario = Scenario.from_data({"version": "0.5.9", "perf": {"tok_s": 100, "ignore_eos": False}})
    assert make_plan(scenario, {}, launch_number=1).honours_ignore_eos is False
    assert make_plan(Scenario.from_data(PERF), {}, launch_number=1).honours_ignore_eos is True
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\nperf: {tok_s: 10, ignore_eos: sometimes}\n")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert "valid boolean" in str(getattr(caught.value, "errors", [caught.value])[0])
