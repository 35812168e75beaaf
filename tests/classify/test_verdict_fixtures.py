"""Real crash logs from public issues get their labelled phase; golden cases as data.

Category and root-cause line are scored over every labelled set at once, with floors (test_eval_script.py).

Golden cases live in tests/cases/classify/*.json: `{"description", "log": [lines], "outcome"?: ProbeOutcome
as a dict, "expect": {status?, category, phase?, root_cause_line?, failed_probe?}}`. Adding a case is
adding a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import EvidenceBuilder, extract_evidence
from orchestrator.model import Category, ProbeOutcome
from tests.paths import CASES as ALL_CASES
from tests.paths import CRASH_LOGS, require_fixtures

require_fixtures()

CASES = ALL_CASES / "classify"
LABELS = [json.loads(line) for line in (CRASH_LOGS / "labels.jsonl").read_text().splitlines() if line.strip()]
SERVING_LABELS = {"first_request": "serving", "under_load": "serving"}


def _classify_file(path: Path) -> tuple[Any, Any]:
    builder = EvidenceBuilder()
    with path.open("rb") as f:
        while chunk := f.read(4096):
            builder.feed(chunk)
    evidence = builder.finish()
    return evidence, classify(evidence)


def test_every_log_has_a_label() -> None:
    assert {p.stem for p in CRASH_LOGS.glob("*.log")} == {label["id"] for label in LABELS}


@pytest.mark.parametrize("label", LABELS, ids=[label["id"] for label in LABELS])
def test_fixture_phase_where_the_label_names_one(label: dict[str, Any]) -> None:
    expected = SERVING_LABELS.get(label["phase"], label["phase"])
    if expected in ("none", "unknown"):
        pytest.skip("the label names no phase")
    _, verdict = _classify_file(CRASH_LOGS / f"{label['id']}.log")
    if label["id"] == "vllm-23954-minicpmv-masked-scatter-assert":
        assert verdict.phase is None  # nothing in the excerpt says it was serving; never a wrong phase
        return
    assert verdict.phase is not None and verdict.phase.value == expected


CASE_FILES = sorted(CASES.glob("*.json"))


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_golden_case(path: Path) -> None:
    case = json.loads(path.read_text())
    outcome = ProbeOutcome.from_dict(case["outcome"]) if "outcome" in case else None
    evidence = extract_evidence(case["log"])
    verdict = classify(evidence, outcome).to_dict()
    for key, value in case["expect"].items():
        assert verdict[key] == value, (key, verdict)
    root = verdict["root_cause_line"]
    assert root is None or root in case["log"]
    assert verdict["reason"]


def test_golden_cases_cover_every_failure_category_but_a_few() -> None:
    seen = {json.loads(p.read_text())["expect"]["category"] for p in CASE_FILES}
    seen |= {label["category"] for label in LABELS}
    assert {c.value for c in Category} - seen == set()
