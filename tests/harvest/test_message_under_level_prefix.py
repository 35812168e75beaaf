"""A level prefix with no message, and the message on the indented lines below it (a logger that breaks the line
after its prefix, or a paste that wrapped it there): those lines are the message, at the prefix's level (issue 32)."""

from __future__ import annotations

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category

_HEAD = "(EngineCore_DP0 pid=559) ERROR 10-20 03:20:46 [multiproc_executor.py:149]"


def test_the_indented_line_under_an_empty_error_prefix_is_its_message() -> None:
    lines = [_HEAD, "  Worker proc VllmWorker-7 died unexpectedly, shutting down executor."]
    evidence = extract_evidence(lines)
    verdict = classify(evidence)
    assert verdict.category is C.UNKNOWN
    assert verdict.root_cause_line is not None and "died unexpectedly" in verdict.root_cause_line
    assert any("died unexpectedly" in e.text for e in evidence.errors)


def test_each_indented_line_under_the_prefix_is_read_at_its_level() -> None:
    lines = ["[2026-01-01 10:00:00] Load weight begin.", "ERROR 01-01 10:00:01 [worker.py:88]",
             "    Engine start-up stopped on rank 1:", "    the scheduler could not reserve its ZMQ ports"]
    evidence = extract_evidence(lines)
    assert [e.text for e in evidence.errors][-2:] == [lines[2].strip(), lines[3].strip()]
    verdict = classify(evidence)
    assert verdict.category is C.UNKNOWN
    assert verdict.root_cause_line is not None and "rank 1" in verdict.root_cause_line


def test_a_warning_prefix_keeps_its_message_a_warning() -> None:
    lines = ["WARNING 01-01 10:00:01 [config.py:12]", "  Failed to read the generation config; using defaults error",
             "INFO 01-01 10:00:05 [api_server.py:1] Started server process"]
    assert classify(extract_evidence(lines)).category is C.HEALTHY


def test_only_the_lines_right_under_the_prefix_are_its_message() -> None:
    """An unindented or prefixed line ends the message; an indented line after that is what it always was."""
    lines = [_HEAD, "INFO 10-20 03:20:47 [core.py:1] Shutting down.", "  Worker proc VllmWorker-7 died unexpectedly"]
    assert classify(extract_evidence(lines)).category is C.HEALTHY
