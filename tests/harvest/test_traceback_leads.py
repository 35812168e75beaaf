"""A traceback whose every line carries the same prefix that no layout names keeps its structure: its frames, code
and exception are read after that prefix, and its header's indentation tells the message from the code."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/x/model_loader/weight_utils.py", line 3, in load_weights',
    "    x = params_dict[name]",
    "KeyError: 'model.layers.0.mlp.foo'",
]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("pod/vllm-0 ", ""),
        ("\t", ""),
        ("    ", ""),
        ("| ", ""),
        ("[worker-0] ", ""),
        ("2026-05-08 11:47:02.257 [Error] (Process) ", ""),
        ("`", "`"),
        ("**", "**"),
        ("> vllm-1  | ", ""),
        ("node-3:1234 ", ""),
    ],
)
def test_a_prefix_on_every_line_keeps_the_tracebacks_structure(before: str, after: str) -> None:
    lines = [before + line + after for line in TRACEBACK]
    evidence = extract_evidence(lines)
    assert [t.exception for t in evidence.tracebacks] == ["KeyError: 'model.layers.0.mlp.foo'"]
    verdict = classify(evidence)
    assert verdict.category is Category.WEIGHTS_LOAD_ERROR  # the frame (load_weights) decides, not the catch-all
    assert verdict.root_cause_line == lines[-1]


def test_code_indented_deeper_than_an_indented_header_stays_code() -> None:
    lines = ["  Traceback (most recent call last):", '    File "/x/a.py", line 3, in f', "      obj.attr",
             "  ValueError: boom"]
    assert [t.exception for t in extract_evidence(lines).tracebacks] == ["ValueError: boom"]
