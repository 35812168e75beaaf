"""General mechanisms from issue 32's unseen-log kinds: where a failure statement is recognised, and whose it is."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category


def test_one_requests_asgi_exception_with_its_traceback_is_the_requests() -> None:
    lines = [
        "[2026-01-01 10:00:00] ERROR:    Exception in ASGI application",
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "/usr/lib/python3.12/site-packages/starlette/_utils.py", line 81, in collapse_excgroups',
        "  |     yield",
    ]
    assert classify(extract_evidence(lines)).category is C.HEALTHY
    # The same request's traceback beside a failure of the server's own is no longer the only failure.
    dead = [*lines, "[2026-01-01 10:00:01] Scheduler hit an exception: RuntimeError: CUDA error: an illegal memory "
            "access was encountered"]
    assert classify(extract_evidence(dead)).category is C.ILLEGAL_MEMORY_ACCESS


@pytest.mark.parametrize(
    "line",
    [
        "vLLM failed to start.  Retry with --enable-serving-output to learn more about the failure.",
        "12:00:01 - Crashed container in pod: server-0",
        "ERROR 12-01 13:05:02 client.py:282] RuntimeError('Engine process (pid 76) died.')",
        "CRITICAL 12-01 13:05:02 launcher.py:99] MQLLMEngine is already dead, terminating server process",
        "RuntimeError: [address=0.0.0.0:1, pid=2] Initialization failed. Please see the error messages above.",
        "Back-off restarting failed container vllm in pod vllm-0_default(0a1b2c)",
    ],
)
def test_a_statement_that_the_server_died_or_never_started_is_a_failure_without_a_cause(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (C.UNKNOWN, line)


def test_a_statement_that_something_died_gives_way_to_the_cause_above_it() -> None:
    lines = ["RuntimeError: CUDA error: an illegal memory access was encountered",
             "vLLM failed to start.  Retry with --enable-serving-output to learn more about the failure."]
    assert classify(extract_evidence(lines)).category is C.ILLEGAL_MEMORY_ACCESS


def test_a_workers_error_quoted_with_a_pointer_to_its_stack_trace_stays_that_error() -> None:
    lines = ["(EngineCore_DP0 pid=1) ERROR 10-22 20:01:49 [core.py:708] RuntimeError: Worker failed with error 'x must "
             "be on CUDA', please check the stack trace above for the root cause",
             "(EngineCore_DP0 pid=1) ERROR 10-22 20:01:50 [multiproc_executor.py:154] Worker proc VllmWorker-1 died "
             "unexpectedly, shutting down executor."]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.PYTHON_EXCEPTION_OTHER, lines[0])


def test_what_a_logger_prints_with_no_exception_at_hand_states_nothing() -> None:
    lines = ["ERROR 12-01 13:05:02 client.py:282] RuntimeError('Engine process (pid 76) died.')",
             "ERROR 12-01 13:05:02 client.py:282] NoneType: None"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.UNKNOWN, lines[0])
    assert classify(extract_evidence(lines[1:])).category is C.HEALTHY
