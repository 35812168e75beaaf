"""What the probes saw combined with what the log says: deadlines, failed probes, early exits, passes."""

from __future__ import annotations

import json

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.harvest.records import Evidence
from orchestrator.model import Category, Phase, ProbeOutcome, ProbeResult, SchedulerEnd, Status

LOADING = "[2026-01-05 10:00:02 TP0] Load weight begin. avail mem=94.02 GB"
READY = [
    "[2026-01-05 10:00:20] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[2026-01-05 10:00:21] The server is fired up and ready to roll!",
]
NAN = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
SIGQUIT = "[2026-01-05 10:00:40] Received sigquit from a child process. It usually means the child failed."


def ev(*lines: str) -> Evidence:
    return extract_evidence(list(lines))


def ok(name: str) -> ProbeResult:
    return ProbeResult(name=name, ok=True, latency_s=0.2)


def test_deadline_with_a_silent_log_is_a_hang_at_that_phase() -> None:
    verdict = classify(ev(LOADING), ProbeOutcome(reached_ready=False, deadline_phase=Phase.MODEL_LOAD))
    assert (verdict.status, verdict.category, verdict.phase) == (
        Status.FAIL,
        Category.HANG_OR_TIMEOUT,
        Phase.MODEL_LOAD,
    )
    assert verdict.root_cause_line == LOADING


def test_deadline_with_only_followups_is_still_a_hang() -> None:
    outcome = ProbeOutcome(reached_ready=False, deadline_phase=Phase.WARMUP)
    assert classify(ev(LOADING, SIGQUIT), outcome).category is Category.HANG_OR_TIMEOUT


def test_deadline_gives_way_to_an_error_the_log_shows() -> None:
    nccl = "RuntimeError: NCCL error: remote process exited or there was a network error"
    verdict = classify(ev(LOADING, nccl), ProbeOutcome(reached_ready=False, deadline_phase=Phase.MODEL_LOAD))
    assert (verdict.category, verdict.phase, verdict.root_cause_line) == (Category.NCCL_ERROR, Phase.MODEL_LOAD, nccl)


def test_wrong_answer_with_a_clean_log_is_wrong_output_at_the_probe() -> None:
    probes = (ok("greedy"), ProbeResult(name="sampled", ok=False, wrong_answer=True, error="no 'Paris'"))
    verdict = classify(ev(LOADING, *READY), ProbeOutcome(reached_ready=True, probes=probes))
    assert (verdict.status, verdict.category, verdict.phase) == (
        Status.FAIL,
        Category.WRONG_OUTPUT,
        Phase.SAMPLED_DECODE,
    )
    assert verdict.failed_probe == "sampled" and verdict.root_cause_line is None
    assert "sampled" in verdict.reason


def test_probe_timeout_with_a_clean_log_is_a_hang_at_the_probe() -> None:
    probes = (ProbeResult(name="concurrent", ok=False, timed_out=True),)
    verdict = classify(ev(*READY), ProbeOutcome(reached_ready=True, probes=probes))
    assert (verdict.category, verdict.phase) == (Category.HANG_OR_TIMEOUT, Phase.CONCURRENT_DECODE)


def test_probe_failure_takes_the_category_the_log_names() -> None:
    probes = (ok("greedy"), ProbeResult(name="sampled", ok=False, error="connection reset by peer"))
    outcome = ProbeOutcome(reached_ready=True, probes=probes, process_died=True, exit_code=-9)
    verdict = classify(ev(*READY, NAN, SIGQUIT, "Killed"), outcome)
    assert (verdict.category, verdict.phase, verdict.root_cause_line) == (
        Category.NAN_IN_PROBS,
        Phase.SAMPLED_DECODE,
        NAN,
    )
    assert verdict.failed_probe == "sampled"


def test_probe_failure_with_a_silent_log_is_still_a_failure() -> None:
    probes = (ProbeResult(name="alive_after", ok=False, error="503"),)
    verdict = classify(ev(*READY), ProbeOutcome(reached_ready=True, probes=probes))
    assert (verdict.status, verdict.category, verdict.phase) == (Status.FAIL, Category.UNKNOWN, Phase.AFTER_DECODE)


def test_probe_failure_with_only_a_followup_keeps_its_line() -> None:
    probes = (ProbeResult(name="greedy", ok=False, error="connection refused"),)
    verdict = classify(ev(*READY, SIGQUIT), ProbeOutcome(reached_ready=True, probes=probes))
    assert (verdict.category, verdict.root_cause_line) == (Category.UNKNOWN, SIGQUIT)


def test_exit_before_ready_uses_the_log_or_the_exit_code() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    died = ProbeOutcome(reached_ready=False, process_died=True, exit_code=1)
    assert classify(ev(LOADING, oom), died).category is Category.CUDA_OOM
    killed = classify(ev(LOADING), ProbeOutcome(reached_ready=False, process_died=True, exit_code=-9))
    assert (killed.category, killed.phase) == (Category.PROCESS_KILLED, Phase.MODEL_LOAD)
    silent = classify(ev(LOADING), died)
    assert (silent.status, silent.category, silent.phase) == (Status.FAIL, Category.UNKNOWN, Phase.MODEL_LOAD)


def test_all_probes_passing_is_a_pass_even_after_our_own_stop() -> None:
    probes = tuple(ok(n) for n in ("greedy", "sampled", "concurrent", "alive_after"))
    shutdown = "[2026-01-05 10:01:00] INFO:     Shutting down"
    outcome = ProbeOutcome(reached_ready=True, probes=probes, process_died=True, exit_code=-15)
    verdict = classify(ev(LOADING, *READY, shutdown), outcome)
    assert (verdict.status, verdict.category, verdict.phase) == (Status.PASS, Category.HEALTHY, Phase.AFTER_DECODE)
    assert verdict.root_cause_line == READY[-1]


def test_log_only_failure_after_ready_is_serving() -> None:
    verdict = classify(ev(LOADING, *READY, NAN))
    assert (verdict.category, verdict.phase) == (Category.NAN_IN_PROBS, Phase.SERVING)


def test_log_only_healthy_phase_is_the_last_marker() -> None:
    verdict = classify(ev(LOADING, *READY))
    assert (verdict.status, verdict.phase, verdict.root_cause_line) == (Status.PASS, Phase.READY, READY[-1])
    assert classify(ev()).category is Category.HEALTHY


def test_a_loggers_exception_message_before_a_cut_traceback_is_the_exception() -> None:
    # logger.exception(e) prints str(e), then the traceback; a paste that stops inside the traceback keeps no
    # exception line, and the message line above it is the exception.
    prefix = "ERROR 02-03 04:05:06 engine.py:300] "
    lines = [prefix + "too many values to unpack (expected 3)", prefix + "Traceback (most recent call last):",
             prefix + '  File "/srv/venv/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 90, in __init__',
             prefix + "    self.model_executor = executor_class(vllm_config=vllm_config)"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (Category.PYTHON_EXCEPTION_OTHER, lines[0])


def test_a_loggers_message_yields_to_the_exception_its_traceback_states() -> None:
    prefix = "ERROR 02-03 04:05:06 worker.py:20] "
    lines = [prefix + "Error executing method load_model. This might cause deadlock in distributed execution.",
             prefix + "Traceback (most recent call last):",
             prefix + '  File "/srv/venv/lib/python3.10/site-packages/app/worker.py", line 9, in run',
             prefix + "    self.load()", prefix + "AttributeError: 'NoneType' object has no attribute 'shape'"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (Category.PYTHON_EXCEPTION_OTHER, lines[-1])


def test_a_launch_its_scheduler_ended_is_killed_never_a_pass() -> None:
    probes = tuple(ok(n) for n in ("greedy", "sampled", "concurrent", "alive_after"))
    preempted = SchedulerEnd("PREEMPTED", "Slurm job 3 on n1 was preempted (JobState=PREEMPTED)")
    outcome = ProbeOutcome(reached_ready=True, probes=probes, process_died=True, scheduler_end=preempted)
    verdict = classify(ev(LOADING, *READY), outcome)
    assert (verdict.status, verdict.category, verdict.phase) == (
        Status.INFRA,
        Category.PROCESS_KILLED,
        Phase.AFTER_DECODE,
    )
    assert (verdict.reason, verdict.root_cause_line, verdict.evidence) == (preempted.reason, READY[-1], None)


def test_a_job_out_of_its_memory_fails_where_the_log_got_to() -> None:
    oom = SchedulerEnd("OUT_OF_MEMORY", "Slurm job 3 ran out of the memory Slurm allows it (JobState=OUT_OF_MEMORY)")
    outcome = ProbeOutcome(reached_ready=False, process_died=True, exit_code=None, scheduler_end=oom)
    verdict = classify(ev(LOADING), outcome)
    assert (verdict.status, verdict.category, verdict.phase, verdict.reason) == (
        Status.FAIL,
        Category.PROCESS_KILLED,
        Phase.MODEL_LOAD,
        oom.reason,
    )
    # A time limit during a probe keeps the probe's phase and the log's cause line; the cluster's, not the cell's.
    nan_probe = (ok("greedy"), ProbeResult(name="sampled", ok=False, error="connection reset by peer"))
    timeout = SchedulerEnd("TIMEOUT", "Slurm job 4 reached its time limit (JobState=TIMEOUT, Reason=TimeLimit)")
    cut = classify(ev(*READY, NAN), ProbeOutcome(reached_ready=True, probes=nan_probe, scheduler_end=timeout))
    assert (cut.status, cut.category, cut.phase, cut.root_cause_line, cut.failed_probe) == (
        Status.INFRA,
        Category.PROCESS_KILLED,
        Phase.SAMPLED_DECODE,
        NAN,
        None,
    )


def test_the_stored_outcome_keeps_the_scheduler_end_and_classifies_the_same() -> None:
    end = SchedulerEnd("NODE_FAIL", "Slurm job 5 on n2 lost its node (node failure) (JobState=NODE_FAIL)")
    outcome = ProbeOutcome(reached_ready=False, process_died=True, scheduler_end=end)
    stored = json.loads(json.dumps(outcome.to_dict()))
    assert ProbeOutcome.from_dict(stored) == outcome
    assert classify(ev(LOADING), ProbeOutcome.from_dict(stored)) == classify(ev(LOADING), outcome)
    # Launches nobody's scheduler ended store the keys they always had.
    assert "scheduler_end" not in ProbeOutcome(reached_ready=True).to_dict()
