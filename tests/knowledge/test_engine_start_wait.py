"""vLLM's API server waiting on its engine core processes: a log that stops while it waits is a start-up that hung;
one that goes on to serve outlived the wait, and one where the engine core reports a failure is that failure."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category


def _wait(second: int, what: str = "1 local, 0 remote", to: str = "start") -> str:
    return (f"(APIServer pid=7) DEBUG 05-01 09:00:{second:02d} [v1/engine/utils.py:950] Waiting for {what} core engine "
            f"proc(s) to {to}.")


@pytest.mark.parametrize(
    "lines",
    [
        [_wait(s) for s in (0, 10, 20, 30)],
        [_wait(0, "2 local, 2 remote", "connect"), _wait(10, "2 local, 2 remote", "connect")],
        # The older wording, before remote engines were counted.
        ["DEBUG 07-27 10:13:56 [utils.py:741] Waiting for 1 local core engine proc(s) to start."],
    ],
)
def test_a_log_that_stops_waiting_for_the_engine_core_is_a_hang(lines: list[str]) -> None:
    verdict = classify(extract_evidence(lines))
    assert verdict.category is C.HANG_OR_TIMEOUT
    assert verdict.root_cause_line in lines


def test_a_server_that_starts_after_the_wait_outlived_it() -> None:
    lines = [_wait(0), _wait(10),
             "(APIServer pid=7) INFO 05-01 09:00:25 [api_server.py:1900] Starting vLLM API server 0 on "
             "http://0.0.0.0:8000",
             "(APIServer pid=7) INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"]
    assert classify(extract_evidence(lines)).category is C.HEALTHY


def test_the_engine_cores_own_failure_outranks_the_wait() -> None:
    lines = [_wait(0), _wait(10),
             "(EngineCore_DP0 pid=9) ERROR 05-01 09:00:12 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
             "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
             _wait(20)]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, lines[2])
