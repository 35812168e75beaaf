"""A stop asked from outside (a signal, Ctrl-C, a cancelled job): once the server was ready, the end of the run, and
what its shutdown logs is no cause; before the server was ready, the start-up was killed (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.signatures import BY_ID, SIGNATURES
from orchestrator.model import Category, Status

C = Category

_VLLM_START = [
    "(APIServer pid=7) INFO 03-01 10:00:00 [api_server.py:1] vLLM API server version 0.25.1",
    "(EngineCore pid=9) INFO 03-01 10:00:10 [core.py:2] Initializing a V1 LLM engine (v0.25.1) with config: x",
    "(EngineCore pid=9) INFO 03-01 10:01:10 [gpu_worker.py:3] Model loading took 30.1 GiB memory",
    "(EngineCore pid=9) INFO 03-01 10:02:00 [core.py:4] init engine (profile, create kv cache, warmup model) took 40 s",
    "(APIServer pid=7) INFO 03-01 10:02:05 [api_server.py:5] Starting vLLM API server 0 on http://0.0.0.0:8000",
]
_VLLM_UP = [
    "(APIServer pid=7) INFO:     Started server process [7]",
    "(APIServer pid=7) INFO:     Waiting for application startup.",
    "(APIServer pid=7) INFO:     Application startup complete.",
]
_VLLM_SERVED = [
    '(APIServer pid=7) INFO:     127.0.0.1:4242 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=7) INFO 03-01 10:05:00 [loggers.py:6] Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg "
    "generation throughput: 30.0 tokens/s, Running: 1 reqs",
]
_ENGINE_DEAD = [
    "(APIServer pid=7) ERROR 03-01 10:09:00 [async_llm.py:704] AsyncLLM output_handler failed.",
    "(APIServer pid=7) ERROR 03-01 10:09:00 [async_llm.py:704] Traceback (most recent call last):",
    '(APIServer pid=7) ERROR 03-01 10:09:00 [async_llm.py:704]   File "/x/vllm/v1/engine/async_llm.py", line 660, in '
    "output_handler",
    "(APIServer pid=7) ERROR 03-01 10:09:00 [async_llm.py:704]     outputs = await engine_core.get_output_async()",
    "(APIServer pid=7) ERROR 03-01 10:09:00 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
    "encountered an issue. See stack trace (above) for the root cause.",
]
_VLLM_SIGTERM = [
    "(EngineCore pid=9) INFO 03-01 10:09:00 [core.py:1214] [shutdown] EngineCore: trigger received signal=SIGTERM",
    "(APIServer pid=7) INFO 03-01 10:09:00 [launcher.py:100] [shutdown] API server: shutdown triggered",
    "(APIServer pid=7) WARNING 03-01 10:09:00 [utils.py:626] [shutdown] Process manager: force killing remaining "
    "processes count=1",
]
_SGLANG_START = [
    "[2026-03-01 10:00:00] server_args=ServerArgs(model_path='org/m', tp_size=1)",
    "[2026-03-01 10:00:30] Load weight begin. avail mem=70.00 GB",
    "[2026-03-01 10:01:30] Load weight end. type=LlamaForCausalLM, avail mem=50.00 GB",
]
_SGLANG_READY = [
    "[2026-03-01 10:02:00] The server is fired up and ready to roll!",
    "[2026-03-01 10:03:00] Prefill batch, #new-seq: 1, #new-token: 47, #cached-token: 1, #running-req: 0",
    '[2026-03-01 10:03:01] INFO:     127.0.0.1:36498 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]
_SGLANG_SIGTERM = [
    "[2026-03-01 10:09:00] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
    "[2026-03-01 10:09:00] Subprocess detokenizer (pid=31) crashed with exit code -15. Triggering SIGQUIT for "
    "cleanup...",
    "[2026-03-01 10:09:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
    "[2026-03-01 10:09:05] kill_process_tree called: parent_pid=30, include_parent=True, pid=30",
]
_CTRL_C = [
    "Traceback (most recent call last):",
    '  File "/x/uvloop/loop.py", line 1, in run_until_complete',
    "KeyboardInterrupt",
    "[2026-03-01 10:09:01] ERROR:    Traceback (most recent call last):",
    '  File "/x/asyncio/runners.py", line 118, in run',
    "asyncio.exceptions.CancelledError",
    "[2026-03-01 10:09:02] Scheduler hit an exception: RuntimeError: the tokenizer manager is gone",
]


def _classify(lines: list[str]) -> tuple[Category, str | None]:
    verdict = classify(extract_evidence(lines))
    return verdict.category, verdict.root_cause_line


@pytest.mark.parametrize(
    "lines",
    [
        [*_VLLM_START, *_VLLM_UP, *_VLLM_SERVED, *_VLLM_SIGTERM, *_ENGINE_DEAD],
        # uvicorn's lines went elsewhere (stderr): the API server's start is where vLLM serves.
        [*_VLLM_START, *_VLLM_SERVED, *_VLLM_SIGTERM, *_ENGINE_DEAD],
        [*_SGLANG_START, *_SGLANG_READY, *_SGLANG_SIGTERM],
        [*_VLLM_START, *_VLLM_UP, *_VLLM_SERVED,
         "slurmstepd: error: *** STEP 956247.1 ON node-027 CANCELLED AT 2026-07-17T00:57:13 ***",
         "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
         "srun: error: node-027: task 0: Killed"],
        [*_SGLANG_START, *_SGLANG_READY, *_CTRL_C],
        [*_VLLM_START, *_VLLM_UP,
         "W0616 00:37:22.830000 41 torch/distributed/elastic/agent/server/api.py:719] Received Signals.SIGTERM death "
         "signal, shutting down workers",
         "torch.distributed.elastic.multiprocessing.api.SignalException: Process 41 got signal: 15"],
    ],
)
def test_a_stop_asked_once_the_server_was_ready_ends_the_run(lines: list[str]) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.status, verdict.category) == (Status.PASS, C.HEALTHY), verdict.reason


def test_a_failure_stated_before_the_stop_still_wins() -> None:
    ima = "RuntimeError: CUDA error: an illegal memory access was encountered"
    lines = [*_SGLANG_START, *_SGLANG_READY, "Traceback (most recent call last):",
             '  File "/x/sglang/srt/managers/scheduler.py", line 9, in event_loop', ima, *_SGLANG_SIGTERM]
    assert _classify(lines) == (C.ILLEGAL_MEMORY_ACCESS, ima)
    oom = ("(EngineCore pid=9) ERROR 03-01 10:08:00 [core.py:9] torch.OutOfMemoryError: CUDA out of memory. Tried to "
           "allocate 2.00 GiB.")
    assert _classify([*_VLLM_START, *_VLLM_UP, *_VLLM_SERVED, oom, *_VLLM_SIGTERM, *_ENGINE_DEAD]) == (C.CUDA_OOM, oom)


def test_a_stop_during_start_up_is_the_kill_not_health() -> None:
    lines = [*_SGLANG_START, *_SGLANG_SIGTERM]
    assert _classify(lines) == (C.PROCESS_KILLED, _SGLANG_SIGTERM[0])
    cancel = "slurmstepd: error: *** JOB 4242 ON node-3 CANCELLED AT 2026-01-01T10:00:00 ***"
    assert _classify([*_VLLM_START[:3], cancel]) == (C.PROCESS_KILLED, cancel)


def test_an_interrupt_during_start_up_is_the_kill_and_the_stops_own_statement_says_it_best() -> None:
    terminated = [
        "(APIServer pid=7) Traceback (most recent call last):",
        '(APIServer pid=7)   File "/x/vllm/entrypoints/openai/api_server.py", line 579, in signal_handler',
        '(APIServer pid=7)     raise KeyboardInterrupt("terminated")',
        "(APIServer pid=7) KeyboardInterrupt: terminated",
    ]
    assert _classify([*_VLLM_START[:3], *terminated]) == (C.PROCESS_KILLED, terminated[-1])
    cancelled = "Cancellation requested; stopping current tasks."
    assert _classify([*_VLLM_START[:3], cancelled, *terminated]) == (C.PROCESS_KILLED, cancelled)


def test_a_failing_start_up_whose_engine_is_then_stopped_keeps_its_cause() -> None:
    bad = "(APIServer pid=7) ERROR 03-01 10:01:00 [api_server.py:9] ValueError: max_model_len 9999999 is greater than "\
          "the derived max_model_len 32768"
    lines = [*_VLLM_START[:3], bad, _VLLM_SIGTERM[0]]
    assert _classify(lines) == (C.INVALID_ARGUMENT, bad)


def test_sglangs_sigquit_from_a_failed_child_is_no_stop() -> None:
    sigquit = "[2026-03-01 10:09:00] Received sigquit from a child process. It usually means the child failed."
    ima = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert _classify([*_SGLANG_START, *_SGLANG_READY, ima, sigquit]) == (C.ILLEGAL_MEMORY_ACCESS, ima)
    # Alone after ready it still says a child died: no health is shown.
    verdict = classify(extract_evidence([*_SGLANG_START, *_SGLANG_READY, sigquit]))
    assert verdict.status is Status.FAIL
    # And what a failed child's sigquit is followed by is not noise: the stop's words are not in it.
    after = "RuntimeError: NCCL error: unhandled system error"
    assert _classify([*_SGLANG_START, *_SGLANG_READY, sigquit, after])[0] is C.NCCL_ERROR


@pytest.mark.parametrize(
    ("reason", "category"),
    [("DUE TO PREEMPTION", C.PROCESS_KILLED), ("DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", C.PROCESS_KILLED),
     ("DUE TO TIME LIMIT", C.HANG_OR_TIMEOUT)],
)
def test_a_job_the_scheduler_took_away_for_its_own_reason_is_no_stop_asked_for(reason: str, category: Category) -> None:
    line = f"slurmstepd: error: *** JOB 4242 ON node-3 CANCELLED AT 2026-01-01T10:00:00 {reason} ***"
    verdict = classify(extract_evidence([*_VLLM_START, *_VLLM_UP, *_VLLM_SERVED, line]))
    assert (verdict.category, verdict.root_cause_line) == (category, line)


@pytest.mark.parametrize(
    "message",
    [
        "SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
        "SIGINT received. signum=2 frame=<frame>. Draining requests and shutting down...",
        "[shutdown] API server: shutdown triggered",
        "[shutdown] API server: shutdown triggered by signal SIGTERM (15); signalling HTTP server shutdown",
        "[shutdown] EngineCore: trigger received signal=SIGINT",
        "Received Signals.SIGHUP death signal, shutting down workers",
        "Received 15 death signal, shutting down workers",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 41 got signal: 2",
        "Cancellation requested; stopping current tasks.",
        "*** STEP 12.0 ON gpu-3 CANCELLED AT 2026-01-01T10:00:00 ***",
    ],
)
def test_the_stop_vocabulary_reads_each_runtimes_own_words(message: str) -> None:
    assert [s.id for s in SIGNATURES if s.stop and s.matches(message)], message


@pytest.mark.parametrize(
    "message",
    [
        "Received sigquit from a child process. It usually means the child failed.",
        "Subprocess scheduler_0 (pid=31) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
        "*** JOB 12 ON gpu-3 CANCELLED AT 2026-01-01T10:00:00 DUE TO PREEMPTION ***",
        "Shutting down FastAPI HTTP server.",
        "Sending process 4015788 closing signal SIGTERM",
        "Worker received SIGTERM handler registration: ok",
    ],
)
def test_what_a_failure_or_a_supervisor_says_is_no_stop_asked_from_outside(message: str) -> None:
    assert not [s.id for s in SIGNATURES if s.stop and s.matches(message)], message


def test_the_stop_statement_never_outranks_a_stated_cause() -> None:
    assert BY_ID["stop_requested"].generic
    assert BY_ID["stop_requested"].specificity < BY_ID["error_statement"].specificity


_OFFLINE = [
    "(EngineCore pid=9) INFO 06-04 05:34:00 [core.py:2] Initializing a V1 LLM engine (v0.22.0) with config: x",
    "(Worker_TP0 pid=11) ERROR 06-04 05:34:39 [fa_utils.py:171] Cannot use FA version 2 is not supported due to FA2 "
    "is only supported on devices with compute capability >= 8",
    "(Worker_TP0 pid=11) INFO 06-04 05:34:39 [cuda.py:378] Using TRITON_ATTN attention backend out of potential "
    "backends: ['TRITON_ATTN', 'FLEX_ATTENTION'].",
    "(EngineCore pid=9) INFO 06-04 05:36:00 [core.py:4] init engine (profile, create kv cache, warmup model) took "
    "40.86 s",
]


def test_vllms_offline_engine_is_up_where_its_start_up_ended() -> None:
    verdict = classify(extract_evidence([*_OFFLINE, "Processed prompts: 100%|##########| 500/500"]))
    assert (verdict.category, verdict.root_cause_line) == (C.HEALTHY, _OFFLINE[-1])
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert _classify([*_OFFLINE, oom]) == (C.CUDA_OOM, oom)
    # Cut before the engine's start-up ended, the ERROR line is all the log says.
    assert classify(extract_evidence(_OFFLINE[:-1])).status is Status.FAIL
