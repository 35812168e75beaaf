"""Failures stated where the line's shape hides them (indentation, a quote mark, no level, a hedge), read through the
whole harvest and verdict; each case is a family of messages, not one log's text."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category
TB = ['Traceback (most recent call last):', '  File "/app/x.py", line 3, in main', "    run()"]


@pytest.mark.parametrize(
    ("lines", "category", "root"),
    [
        # A CUDA or HIP runtime error stated with no exception and no level around it: the device failed (unknown,
        # as its reason names no category); with a level at WARNING or INFO too (a level is no veto).
        (["CUDA error: invalid device ordinal"], C.UNKNOWN, 0),
        (["[rank3]: HIP error: invalid device ordinal"], C.UNKNOWN, 0),
        (["INFO 01-02 03:04:05 [worker.py:88] CUDA error: operation not supported on global/shared address space"],
         C.UNKNOWN, 0),
        # argparse ends the program whatever the indentation of a paste.
        (["    launch_server.py: error: unrecognized arguments: --speculative-model [ngram] --tp-size 2"],
         C.INVALID_ARGUMENT, 0),
        (["  api_server.py: error: argument --dtype: invalid choice: 'fp9' (choose from 'auto', 'half')"],
         C.INVALID_ARGUMENT, 0),
        # An exception's own line in a paste indented as a whole, with no traceback above it: the exception still.
        (["  ValueError: max_model_len (40960) is greater than the derived max_model_len (32768) (config)"],
         C.INVALID_ARGUMENT, 0),
        (["    NotImplementedError: FlashInfer backend does not support fp8 kv cache on this model",
          "    without a scale for each layer."], C.UNSUPPORTED_CONFIG, 0),
        # A quote mark opening a quoted exception is the paste's, not the message's.
        (['"RuntimeError: Chat template foo/bar.jinja is not a built-in template name'],
         C.TOKENIZER_OR_TEMPLATE_ERROR, 0),
        (["\u201cValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)"],
         C.INVALID_ARGUMENT, 0),
        # Ascend's op compiler that does not start: indented, no level, first line of its trace the cause.
        (["        [Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]",
          "        [Set][Options]OpCompileProcessor init failed![FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]"],
         C.KERNEL_JIT_ERROR, 0),
        # A CUDA call failing inside a collective's kernel, printed with no level, before the worker's death notice.
        (["Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'",
          "(EngineCore pid=9) ERROR 09-10 09:37:41 [multiproc_executor.py:314] Worker proc VllmWorker-0 died "
          "unexpectedly (exit code: None), shutting down executor."], C.NCCL_ERROR, 0),
        # The same check raised as an exception (CHECK_CUDA_SUCCESS: the CUDA error's string, then file:line below).
        (["RuntimeError: invalid resource handle", "/workspace/csrc/allreduce/custom_all_reduce.cuh:412"],
         C.NCCL_ERROR, 0),
        # ... while the reason it names still decides when it names one.
        (["Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'an illegal memory access was encountered'"],
         C.ILLEGAL_MEMORY_ACCESS, 0),
        # The KV transfer engine of disaggregated serving that does not start is the distributed runtime failing.
        ([*TB, "RuntimeError: Ascend Transfer Engine initialization failed."], C.NCCL_ERROR, -1),
        ([*TB, "RuntimeError: Mooncake transfer engine init failed: no RDMA device"], C.NCCL_ERROR, -1),
        # Of two statements of one failure, the one that states it outright beats the one that hedges.
        (["[rank1]:[W623 15:37:01.8 socket.cpp:460] [c10d] waitForInput: poll for socket SocketImpl(fd=100, "
          "addr=[n0]:43590, remote=[n0]:20000) returned 0, likely a timeout",
          "[rank1]:[W623 15:37:01.8 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, addr=[n0]:43590, "
          "remote=[n0]:20000) timed out after 1800000ms"], C.HANG_OR_TIMEOUT, 1),
    ],
)
def test_a_failure_stated_in_a_disguised_line(lines: list[str], category: Category, root: int) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (category, lines[root])


def test_an_indented_raise_in_a_traceback_is_code_not_a_statement() -> None:
    lines = [*TB[:2], '    raise ValueError("max_model_len must be positive")', "KeyError: 'layers.0.weight'"]
    verdict = classify(extract_evidence(lines))
    assert verdict.root_cause_line == lines[-1]


def test_a_crash_listed_among_possible_causes_is_no_crash() -> None:
    lines = [*TB, "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
             "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Some common causes "
             "include: (1) the process was killed by the OOM killer due to high memory usage, (2) ray stop --force "
             "was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error."]
    evidence = extract_evidence(lines)
    assert "native_crash" not in {h.signature for h in evidence.hits}
    # The wrapper names no other failure, so it quotes nothing: its own line states what died.
    assert (classify(evidence).category, classify(evidence).root_cause_line) == (C.UNKNOWN, lines[3])


READY = "[2025-06-25 14:01:42] The server is fired up and ready to roll!"
SERVING = "[2025-06-25 14:02:05] INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK"


@pytest.mark.parametrize("exception", ["asyncio.exceptions.CancelledError", "BrokenPipeError: [Errno 32] Broken pipe",
                                       "ConnectionResetError: [Errno 104] Connection reset by peer"])
def test_one_connection_ending_is_outlived_by_a_server_that_goes_on(exception: str) -> None:
    tail = ["[2025-06-25 14:02:00] ERROR:    Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/asyncio/streams.py", line 3, in drain', exception]
    assert classify(extract_evidence([READY, *tail, SERVING])).category is C.HEALTHY
    # With nothing served after it, the server did not go on.
    assert classify(extract_evidence([READY, *tail])).category is not C.HEALTHY


def test_a_stop_by_hand_once_ready_is_the_end_of_a_run_not_a_failure() -> None:
    stop = ["Traceback (most recent call last):", '  File "/usr/lib/python3.10/asyncio/runners.py", line 44, in run',
            "KeyboardInterrupt"]
    assert classify(extract_evidence([READY, SERVING, *stop])).category is C.HEALTHY
    # Interrupted before the server was ever ready, the start-up did not finish.
    loading = "[2025-06-25 14:00:00 TP0] Load weight begin. avail mem=78.38 GB"
    assert classify(extract_evidence([loading, *stop])).category is not C.HEALTHY


def test_a_flattened_traceback_is_classified_and_its_line_is_the_root() -> None:
    flat = (
        'config, ) [rank0]: ^^^^^^ [rank0]: File "/x/worker.py", line 203, in load_model [rank0]: self.load() '
        "[rank0]: RuntimeError: HIP error: invalid device function [rank0]: HIP kernel errors might be "
        "asynchronously reported at some other API call"
    )
    verdict = classify(extract_evidence(["INFO 04-27 07:30:19 __init__.py:179] Automatically detected platform rocm.",
                                         flat]))
    assert verdict.category is Category.KERNEL_NOT_SUPPORTED_ON_ARCH
    assert verdict.root_cause_line == flat


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
        "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
        "RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
    ],
)
def test_a_missing_jit_toolchain_is_a_failed_jit_build(line: str) -> None:
    tb = ["Traceback (most recent call last):", '  File "/x/build.py", line 3, in build', line]
    assert classify(extract_evidence(tb)).category is Category.KERNEL_JIT_ERROR
