"""What the server outlived, and tracebacks and statements read whatever the paste did to them (issue 32)."""

from __future__ import annotations

import pytest

from orchestrator.classify.survival import ready_line_no
from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category

_VLLM_CAUGHT_IMPORT = [
    "(APIServer pid=1) INFO 06-11 19:49:16 [api_utils.py:273] non-default args: {'model': 'org/some-model'}",
    "(EngineCore pid=9) INFO 06-11 19:49:30 [core.py:113] Initializing a V1 LLM engine (v0.9.0) with config: x",
    "(EngineCore pid=9) INFO 06-11 19:55:40 [kv_cache_utils.py:1790] GPU KV cache size: 379,381 tokens",
    "(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408] Module some_kernels was found but failed to "
    "import",
    "(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408] Traceback (most recent call last):",
    '(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408]   File "/x/vllm/utils/import_utils.py", '
    "line 406, in _has_module",
    "(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408]     importlib.import_module(module_name)",
    '(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408]   File "/x/some_kernels/__init__.py", '
    "line 16, in <module>",
    "(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408]     from . import _C",
    "(EngineCore pid=9) WARNING 06-11 19:55:42 [import_utils.py:408] ImportError: cannot import name '_C' from "
    "partially initialized module 'some_kernels' (most likely due to a circular import)",
    "(EngineCore pid=9) INFO 06-11 19:56:43 [core.py:310] init engine (profile, create kv cache, warmup model) "
    "took 131.10 s",
    "(APIServer pid=1) INFO 06-11 19:56:51 [api_server.py:583] Starting vLLM server on http://0.0.0.0:8000",
]
_APP_STARTED = [
    "(APIServer pid=1) INFO:     Started server process [1]",
    "(APIServer pid=1) INFO:     Waiting for application startup.",
    "(APIServer pid=1) INFO:     Application startup complete.",
]
_SERVED = ['(APIServer pid=1) INFO:     127.0.0.1:52090 - "POST /v1/chat/completions HTTP/1.1" 200 OK']


def test_vllm_is_ready_where_its_application_started_when_the_log_lacks_uvicorns_line() -> None:
    lines = [*_VLLM_CAUGHT_IMPORT, *_APP_STARTED, *_SERVED]
    evidence = extract_evidence(lines)
    assert ready_line_no(evidence) == lines.index(_APP_STARTED[-1]) + 1
    verdict = classify(evidence)
    assert (verdict.category, verdict.root_cause_line) == (C.HEALTHY, _APP_STARTED[-1])


def test_an_import_error_the_log_never_shows_the_server_outlive_stays_a_failure() -> None:
    assert classify(extract_evidence(_VLLM_CAUGHT_IMPORT[:-2])).category is C.IMPORT_ERROR


def test_uvicorns_own_line_still_marks_vllm_ready_and_a_failure_after_the_start_is_not_outlived() -> None:
    uvicorn = "(APIServer pid=1) INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
    lines = [*_VLLM_CAUGHT_IMPORT, *_APP_STARTED, uvicorn]
    assert ready_line_no(extract_evidence(lines)) == len(lines)
    oom = ("(EngineCore pid=9) ERROR 06-11 19:57:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
           "Tried to allocate 2.00 GiB.")
    verdict = classify(extract_evidence([*_VLLM_CAUGHT_IMPORT, *_APP_STARTED, *_SERVED, oom]))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, oom)


_TB = ["Traceback (most recent call last):", '  File "/srv/app/engine/utils.py", line 254, in bind_workers',
       "    raise RuntimeError("]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: NUMA binding was requested, but the GPU-to-NUMA topology could not be detected. Pass "
        "--numa-bind-nodes explicitly or disable --numa-bind.",
        "RuntimeError: CPU binding needs NUMA nodes here; pass `--numa-bind-cpus` explicitly.",
        "ValueError: Expert parallelism needs more than one GPU in this run; remove --enable-expert-parallel.",
    ],
)
def test_an_exception_whose_way_out_is_dropping_or_giving_a_flag_is_the_arguments(line: str) -> None:
    verdict = classify(extract_evidence([*_TB, line]))
    assert (verdict.category, verdict.root_cause_line) == (C.INVALID_ARGUMENT, line)


@pytest.mark.parametrize(
    "line",
    [
        # A flag the tool does not know is nothing to go by.
        "RuntimeError: The plugin could not start. Pass --plugin-home explicitly or disable --plugin-autoload.",
        # A cause the message names says more than the advice after it.
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. Disable --enable-torch-compile.",
    ],
)
def test_advice_about_an_unknown_flag_or_after_a_named_cause_decides_nothing(line: str) -> None:
    assert classify(extract_evidence([*_TB, line])).category is not C.INVALID_ARGUMENT


def test_a_csv_exported_traceback_keeps_its_code_lines_as_code() -> None:
    rows = ['1756144013378,"(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1]   File ""/x/engine/utils.py"", '
            'line 759, in wait_for_engine_startup"',
            '1756144013378,"(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1]     raise RuntimeError(""Engine core '
            'initialization failed. """',
            "1756144014882,(APIServer pid=1) ERROR 08-25 10:46:53 [core.py:1] RuntimeError: Engine core initialization "
            "failed. See root cause above. Failed core proc(s): {}"]
    verdict = classify(extract_evidence(rows))
    assert (verdict.category, verdict.root_cause_line) == (C.UNKNOWN, rows[-1])


_KV_ENGINE = ["[2026-02-27 11:31:26 TP1] Scheduler hit an exception: Traceback (most recent call last):",
              '  File "/x/sglang/srt/disaggregation/decode.py", line 310, in _init_kv_manager',
              "    kv_manager = kv_manager_class(",
              '  File "/x/sglang/srt/disaggregation/mooncake/transfer_engine.py", line 181, in initialize',
              "    ret_value = self.engine.initialize("]


@pytest.mark.parametrize(
    "errno", ["Address family not supported by protocol", "Protocol not supported", "Socket type not supported"],
)
def test_a_socket_the_system_cannot_create_is_no_refused_setting(errno: str) -> None:
    # Raised by a KV transfer engine starting up: the distributed runtime's network failed.
    line = f"RuntimeError: open: {errno}"
    verdict = classify(extract_evidence([*_KV_ENGINE, line]))
    assert (verdict.category, verdict.root_cause_line) == (C.NCCL_ERROR, line)
    # Anywhere else it is a plain exception, not an unsupported configuration.
    elsewhere = ["Traceback (most recent call last):", '  File "/srv/app/metrics.py", line 12, in serve',
                 "    sock = socket.socket(socket.AF_INET6)", f"OSError: [Errno 97] {errno}"]
    assert classify(extract_evidence(elsewhere)).category is C.PYTHON_EXCEPTION_OTHER


def test_a_kv_transfer_engines_own_refusal_of_a_setting_stays_one() -> None:
    line = "ValueError: The transport protocol 'efa' is not supported by this transfer engine build."
    assert classify(extract_evidence([*_KV_ENGINE, line])).category is C.UNSUPPORTED_CONFIG


def test_a_failure_logged_under_spdlogs_error_tag_is_no_healthy_log() -> None:
    lines = ["[19:08:34.164951][GC          ][error][tid:44F8A] Failed to load the kernel for node 12: GLUE_FAILED",
             "[19:08:34.164986][PASS_MANAGER][error][tid:44F8A] Graph optimization failed pass: loadKernels"]
    verdict = classify(extract_evidence(lines))
    assert verdict.category is not C.HEALTHY and verdict.root_cause_line == lines[0]
    quiet = ["[19:08:34.164951][GC          ][info][tid:44F8A] Loaded 12 kernels, 0 failed to load"]
    assert classify(extract_evidence(quiet)).category is C.HEALTHY
