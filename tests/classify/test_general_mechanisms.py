"""General mechanisms from issue 32's unseen-log kinds: where a failure statement is recognised, and whose it is."""

from __future__ import annotations

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

