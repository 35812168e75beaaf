"""A traceback whose every line carries the same prefix that no layout names keeps its structure: its frames, code
and exception are read after that prefix, and its header's indentation tells the message from the code."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import EvidenceBuilder, extract_evidence
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


def test_a_lone_exceptions_message_carried_over_to_the_next_line_is_the_exceptions() -> None:
    lines = ["kernel_warmup.py:99  sparse_mla_attention_warmup(worker)",
             "tvm.error.InternalError: Check failed: num_tokens > 64 (5 vs. 64) : Decode (num_tokens <= 64)",
             "must go through sparse_mla_sm120_decode_a or sparse_mla_sm120_decode_b; got num_tokens=5"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (Category.KERNEL_NOT_SUPPORTED_ON_ARCH, lines[1])


def test_the_live_feed_reads_a_lone_exceptions_continuation_as_a_file_read_does() -> None:
    # A sweep feeds the log line by line (EvidenceBuilder.feed_line), whose fast path skips a dull line: not one that
    # may go on a lone exception's message.
    lines = ["tvm.error.InternalError: Check failed: num_tokens > 64 (5 vs. 64) : Decode (num_tokens <= 64)",
             "must go through sparse_mla_sm120_decode_a or sparse_mla_sm120_decode_b; got num_tokens=5"]
    live = EvidenceBuilder()
    for line in lines:
        live.feed_line(line)
    assert live.finish().to_dict() == extract_evidence(lines).to_dict()
    assert classify(extract_evidence(lines)).category is Category.KERNEL_NOT_SUPPORTED_ON_ARCH


def test_a_line_that_states_a_failure_itself_stays_its_own_statement() -> None:
    lines = ["pydantic_core._pydantic_core.ValidationError: 1 validation error for EngineConfig",
             "Value error, Model Runner V2 does not yet support: ngram speculative decoding [type=value_error]"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (Category.UNSUPPORTED_CONFIG, lines[1])


def test_a_next_line_of_its_own_is_no_continuation() -> None:
    wrapped = ["ValueError: this kernel is not available", "for sm120 GPUs"]
    assert classify(extract_evidence(wrapped)).category is Category.KERNEL_NOT_SUPPORTED_ON_ARCH
    logged = ["ValueError: this kernel is not available", "[2025-01-01 10:00:00] for sm120 GPUs"]
    assert classify(extract_evidence(logged)).category is Category.PYTHON_EXCEPTION_OTHER
