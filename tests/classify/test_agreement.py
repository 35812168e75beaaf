"""Answers that disagree across cells: the pure comparison, the simulator's `drift`, and whole sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from orchestrator.classify.agreement import GreedyAnswer, answer_key, disagreeing
from orchestrator.model import Category, Phase, Status, Verdict
from orchestrator.probe.answers import implausibility, known_answer_problem
from orchestrator.sim import answers
from orchestrator.store import Store
from tests.simhost import orchestrator, processes_under, write_hosts

PASS = Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY, "ready line", "no failure in the log")
PARIS = " Paris. It is the capital of France and one of the most visited places in the world."
LYON = " Lyon. It is the capital of France and one of the most visited places in the world."


def answer(n: int, text: str, expect: tuple[str, ...] = (), prompt: str = "p") -> GreedyAnswer:
    return GreedyAnswer(f"run{n}", f"cell{n}", f"cell {n}", prompt, text, PASS, expect)


def test_the_odd_answer_out_is_wrong_output_with_both_answers_in_evidence() -> None:
    group = [answer(i, PARIS) for i in range(4)] + [answer(9, LYON)]
    (revision,) = disagreeing(group)
    assert revision.run_id == "run9"
    verdict = revision.verdict
    expected = (Status.FAIL, Phase.GREEDY_DECODE, Category.WRONG_OUTPUT)
    assert (verdict.status, verdict.phase, verdict.category) == expected
    assert verdict.failed_probe == "greedy" and verdict.root_cause_line is None
    assert verdict.evidence is not None
    assert verdict.evidence["answer"] == LYON and verdict.evidence["majority_answer"] == PARIS
    assert (verdict.evidence["majority_cells"], verdict.evidence["cells_compared"]) == (4, 5)
    assert verdict.evidence["previous_verdict"]["status"] == "pass"
    assert "disagrees with 4 of 5 passing cells" in verdict.reason and "Lyon" in verdict.reason


def test_no_clear_majority_blames_no_one() -> None:
    assert disagreeing([answer(1, PARIS), answer(2, PARIS), answer(3, LYON)]) == []  # two agreeing cells
    half = [answer(i, PARIS) for i in range(3)] + [answer(i, LYON) for i in range(3, 6)]
    assert disagreeing(half) == []  # three against three
    assert disagreeing([answer(i, f" answer {i}") for i in range(6)]) == []  # all different


def test_the_known_answer_outranks_the_majority() -> None:
    # Most cells drifted; the one holding the known answer is right, whatever the count.
    group = [answer(i, LYON, ("Paris",)) for i in range(4)] + [answer(9, PARIS, ("Paris",))]
    assert disagreeing(group) == []


def test_late_differences_and_spelling_do_not_count() -> None:
    late = " Paris. It is the capital of France and one of the most visited cities of Europe today."
    shouting = " PARIS. It is the capital of France, and one of the most visited places in the world!"
    assert answer_key(late) == answer_key(PARIS) == answer_key(shouting)
    assert disagreeing([answer(i, PARIS) for i in range(4)] + [answer(8, late), answer(9, shouting)]) == []


def test_prompts_are_compared_separately() -> None:
    group = [answer(i, PARIS, prompt="france") for i in range(3)]
    group += [answer(i, " 42", prompt="sum") for i in range(3, 6)]
    assert disagreeing([*group, answer(9, " 52", prompt="sum")])[0].run_id == "run9"


def test_the_simulator_drifts_fluently() -> None:
    def greedy(prompt: str, drift: bool) -> str:
        return answers.generate(prompt, max_new_tokens=16, temperature=0, seed=None, garbage=False, drift=drift).text

    assert "Paris" in greedy("The capital city of France is", False)
    drifted = greedy("The capital city of France is", True)
    assert "Lyon" in drifted and "Paris" not in drifted
    assert greedy("17 + 25 =", True).strip() == "52" and greedy("17 + 25 =", False).strip() == "42"
    plain, other = greedy("Describe the system.", False), greedy("Describe the system.", True)
    assert plain != other and greedy("Describe the system.", True) == other  # deterministic, elsewhere
    for text in (drifted, other, greedy("Count from one to five in words.", True)):
        assert implausibility(text) is None, text  # reads well: only a comparison can tell
    assert known_answer_problem(drifted, ("Paris",)) is not None


SCENARIO = {
    "version": "0.5.9",
    "gpus": 8,
    "timing": {"import_s": 0.02, "load_weights_s": 0.05, "memory_alloc_s": 0.02, "capture_cuda_graph_s": 0.05},
    "rules": [
        {
            "when": {"attention-backend": "triton", "kv-cache-dtype": "fp8_e4m3"},
            "fail": {"at": "greedy_decode", "kind": "drift"},
        }
    ],
}
MATRIX = """\
name: drift
flags: {{model-path: /models/llama}}
{probes}matrix:
  attention-backend: [triton, flashinfer, fa3]
  kv-cache-dtype: [auto, bf16, fp8_e4m3]
  mem-fraction-static: [0.8, 0.85]
"""


def _sweep(tmp_path: Path, probes: str) -> tuple[list[dict[str, object]], Path, str]:
    scenario = tmp_path / "drift.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.format(probes=probes))
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=scenario)
    db = tmp_path / "o.db"
    out = tmp_path / "out.json"
    result = orchestrator(
        "sweep", str(matrix), "--host", "simhost", "--hosts", str(hosts), "--json-out", str(out), db=db, timeout=400
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert processes_under(tmp_path / "work") == []
    return json.loads(out.read_text())["cells"], db, str(matrix)


def _drifting(flags: dict[str, object]) -> bool:
    return flags.get("attention-backend") == "triton" and flags.get("kv-cache-dtype") == "fp8_e4m3"


def _check(cells: list[dict[str, object]]) -> None:
    assert len(cells) == 18
    for cell in cells:
        flags = cell["flags"]
        assert isinstance(flags, dict)
        got = (cell["status"], cell["phase"], cell["category"])
        if _drifting(flags):
            assert got == ("fail", "greedy_decode", "wrong_output"), cell
        else:
            assert cell["status"] == "pass", cell


def test_a_drifting_flag_pair_fails_exactly_its_cells_by_the_known_answer(tmp_path: Path) -> None:
    cells, _db, _matrix = _sweep(tmp_path, "")
    _check(cells)


def test_without_a_known_answer_the_other_cells_show_the_drift(tmp_path: Path) -> None:
    probes = "probes:\n  greedy: {prompt: 'Describe the system.', expect_any: []}\n"
    cells, db, matrix = _sweep(tmp_path, probes)
    _check(cells)
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        revised = [r for r in store.runs(sweep.sweep_id) if r.verdict and r.verdict.category is Category.WRONG_OUTPUT]
    assert len(revised) == 2
    for run in revised:
        evidence = run.verdict.evidence if run.verdict else None
        assert evidence is not None and evidence["rule"] == "answer_agreement"
        assert (evidence["majority_cells"], evidence["cells_compared"]) == (16, 18)
        assert evidence["answer"] != evidence["majority_answer"]
        assert implausibility(str(evidence["answer"])) is None
    # A resumed sweep compares again and finds the same: nothing relaunched, nothing revised twice.
    hosts = tmp_path / "hosts.yaml"
    again = orchestrator(
        "sweep", matrix, "--host", "simhost", "--hosts", str(hosts), "--resume", sweep.sweep_id, db=db, timeout=400
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    with Store(db) as store:
        results = store.cell_results(sweep.sweep_id)
        runs = store.runs(sweep.sweep_id)
    assert len(runs) == 18
    failed = [r.category.value if r.category else "" for r in results if r.status is Status.FAIL]
    assert sorted(failed) == ["wrong_output", "wrong_output"]
