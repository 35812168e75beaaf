"""SGLang kills its own processes after one failed (kill_process_tree, the SIGQUIT handler), ending with SIGKILL on
itself: the exit -9 or 137 a harness then reports is that teardown's, not a kill from outside (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.signatures import BY_ID
from orchestrator.model import Category, ProbeOutcome

C = Category

_FAILURE = [
    "[2026-01-01 10:00:00] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16",
    "[2026-01-01 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/managers/scheduler.py", line 2900, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)",
    '  File "/x/sglang/srt/managers/scheduler.py", line 300, in __init__',
    "    self.init_memory_pool()",
    "RuntimeError: unexpected device state: stream 3 was never created",
    "",
]
_TEARDOWNS = [
    "[2026-01-01 10:00:05] Received sigquit from a child process. It usually means the child failed.",
    "[2026-01-01 10:00:05] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
    "[2026-01-01 10:00:05] kill_process_tree called: parent_pid=4242, include_parent=True, pid=4242",
]
_HARNESS_KILLED = [
    "Traceback (most recent call last):",
    '  File "/x/sglang/test/test_utils.py", line 1027, in popen_launch_server',
    '    raise Exception(error_msg + ". Check server logs for errors.")',
    "Exception: Server process exited with code -9. Check server logs for errors.",
]


@pytest.mark.parametrize("teardown", _TEARDOWNS)
def test_an_exit_minus_nine_after_the_servers_own_teardown_is_not_a_kill(teardown: str) -> None:
    verdict = classify(extract_evidence([*_FAILURE, teardown, *_HARNESS_KILLED]))
    assert verdict.category is C.PYTHON_EXCEPTION_OTHER
    assert verdict.root_cause_line is not None and "unexpected device state" in verdict.root_cause_line


@pytest.mark.parametrize("teardown", _TEARDOWNS)
def test_a_teardown_and_its_kill_alone_name_no_cause(teardown: str) -> None:
    lines = ["[2026-01-01 10:00:00] Load weight end. type=Qwen3ForCausalLM", teardown, "Killed"]
    verdict = classify(extract_evidence(lines))
    assert verdict.category is C.UNKNOWN


def test_a_kill_before_any_teardown_is_still_a_kill() -> None:
    """The counter-case: an exit -9 with no teardown of the server's own is a kill from outside."""
    verdict = classify(extract_evidence(["[2026-01-01 10:00:00] Load weight end. type=Qwen3ForCausalLM",
                                         *_HARNESS_KILLED]))
    assert verdict.category is C.PROCESS_KILLED


def test_a_kill_that_names_the_oom_killer_is_one_after_a_teardown_too() -> None:
    lines = [_TEARDOWNS[0], "Out of memory: Killed process 4242 (python3) total-vm:812345678kB"]
    assert classify(extract_evidence(lines)).category is C.PROCESS_KILLED


def test_a_live_exit_minus_nine_after_the_teardown_keeps_the_stated_cause() -> None:
    evidence = extract_evidence([*_FAILURE, _TEARDOWNS[2]])
    verdict = classify(evidence, ProbeOutcome(reached_ready=False, process_died=True, exit_code=-9))
    assert verdict.category is C.PYTHON_EXCEPTION_OTHER
    lone = extract_evidence(["[2026-01-01 10:00:00] Load weight end. type=Qwen3ForCausalLM", _TEARDOWNS[2]])
    assert classify(lone, ProbeOutcome(reached_ready=False, process_died=True, exit_code=-9)).category is C.UNKNOWN


def test_kill_process_tree_sparing_its_caller_is_no_teardown_of_it() -> None:
    row = BY_ID["own_teardown"]
    assert row.matches("kill_process_tree called: parent_pid=4242, include_parent=True, pid=4242")
    assert not row.matches("kill_process_tree called: parent_pid=4242, include_parent=False, pid=4242")
