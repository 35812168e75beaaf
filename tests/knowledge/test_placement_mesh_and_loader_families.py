"""Families read from issue 32's batches 32v..32w2: a parallel world larger than the devices, Gloo's incomplete mesh,
a device out of memory stated only in a C++ exception's `what():`, a loader notice that goes on without what it could
not load, and a shard copy failing in a parameter's loader."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category, Status

C = Category

_PLACEMENT_WAIT = (
    "INFO 05-26 18:54:03 [ray_utils.py:233] Waiting for creating a placement group of specs for 10 seconds. "
    "specs=[{'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]."
)


def _classify(*lines: str) -> tuple[Category, str | None]:
    verdict = classify(extract_evidence(list(lines)))
    return verdict.category, verdict.root_cause_line


@pytest.mark.parametrize(
    "line",
    [
        "WARNING 05-26 18:53:53 [ray_utils.py:342] The number of required GPUs exceeds the total number of available "
        "GPUs in the placement group.",
        "ValueError: The number of required NPUs exceeds the total number of available NPUs in the placement group. "
        "Required number of devices: 4. Total number of devices: 2.",
        "ValueError: World size (4) is larger than the number of available GPUs (1) in this node. If this is "
        "intentional and you are using: - ray, set '--distributed-executor-backend ray'.",
    ],
)
def test_a_parallel_world_larger_than_the_devices_is_the_parallel_sizes(line: str) -> None:
    assert _classify(line, _PLACEMENT_WAIT) == (C.INVALID_ARGUMENT, line)


def test_the_ray_runtime_failing_to_place_the_driver_is_still_the_distributed_runtimes() -> None:
    line = "ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group."
    assert _classify(line) == (C.NCCL_ERROR, line)


def test_a_device_shortfall_warning_the_server_started_after_was_survived() -> None:
    warning = ("WARNING 05-26 18:53:53 [ray_utils.py:342] The number of required GPUs exceeds the total number of "
               "available GPUs in the placement group.")
    ready = "(APIServer pid=7) INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
    assert classify(extract_evidence(["INFO 05-26 18:53:50 [api_server.py:1] vLLM API server version 0.8.5",
                                      warning, ready])).status is Status.PASS


def test_gloos_connectivity_report_of_a_missing_peer_is_the_distributed_runtime() -> None:
    missing = "[Gloo] Rank 8 is NOT connected to: [1]"
    lines = [
        "[Gloo] Rank 7 is connected to 15 peer ranks. Expected number of connected peer ranks is : 15",
        "[Gloo] Rank 8 is connected to 14 peer ranks. Expected number of connected peer ranks is : 15",
        missing,
        "RuntimeError: Failed to start prefill node on 10.0.0.7: Server failed to start within the timeout period.",
    ]
    assert _classify(*lines) == (C.NCCL_ERROR, missing)
    # A complete mesh reports nothing missing.
    assert classify(extract_evidence(lines[:1])).status is Status.PASS


def test_a_device_out_of_memory_stated_only_in_a_cpp_exceptions_what_line() -> None:
    what = ("  what():  NPU out of memory. Tried to allocate 4.00 GiB (NPU 4; 61.27 GiB total capacity; 52.08 GiB "
            "already allocated; 1.50 GiB free) If reserved memory is >> allocated memory try setting max_split_size_mb "
            "to avoid fragmentation.")
    lines = [
        "[2026-01-19 20:23:03 TP0] Capture npu graph begin. This can take up to several minutes. avail mem=12.03 GB",
        "Capturing batches (bs=22 avail_mem=1.84 GB):  11%| 1/9 terminate called after throwing an instance of "
        "'c10::Error'",
        what,
        "Exception raised from malloc at build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1634 (most recent call "
        "first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x68 (0xffff in libc10.so)",
    ]
    assert _classify(*lines) == (C.CUDA_OOM, what)


def test_pytorchs_cpp_backtrace_header_is_no_exception_of_its_own() -> None:
    header = ("Exception raised from malloc at build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1634 (most recent "
              "call first):")
    native = "terminate called after throwing an instance of 'c10::Error'"
    assert _classify(native, header) == (C.UNKNOWN, native)


def test_a_loader_notice_that_goes_on_without_what_it_could_not_load_is_no_failure() -> None:
    notice = ("[2026-06-09 03:34:35] Failed to load generation config for /models/Qwen3.5-9B: /models/Qwen3.5-9B does "
              "not appear to have a file named generation_config.json. Checkout 'https://huggingface.co//models/"
              "Qwen3.5-9B/tree/main' for available files.. Proceeding without generation config.")
    ima = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert _classify(notice, ima) == (C.ILLEGAL_MEMORY_ACCESS, ima)
    assert classify(extract_evidence([notice])).status is Status.PASS
    # Without the words that it goes on, the same failure stays one.
    stopped = notice.replace(" Proceeding without generation config.", "")
    assert classify(extract_evidence([stopped])).status is Status.FAIL


def test_a_shard_copy_failing_in_a_parameters_loader_is_the_checkpoints() -> None:
    error = "RuntimeError: start (0) + length (1792) exceeds dimension size (896)."
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/models/llama.py", line 481, in load_weights',
        "    weight_loader(param, loaded_weight)",
        '  File "/x/vllm/model_executor/layers/linear.py", line 1626, in weight_loader_v2',
        "    param.load_row_parallel_weight(loaded_weight=loaded_weight)",
        '  File "/x/vllm/model_executor/parameter.py", line 222, in load_row_parallel_weight',
        "    loaded_weight = loaded_weight.narrow(self.input_dim, self.tp_rank * shard_size, shard_size)",
        error,
    ]
    assert _classify(*lines) == (C.WEIGHTS_LOAD_ERROR, error)


@pytest.mark.parametrize(
    "line",
    [
        "openai_harmony.HarmonyError: invalid tiktoken vocab file: hash mismatch: computed=e3b0c44298fc1c149afbf4c8"
        "996fb92427ae41e4649b934ca495991b7852b855",
        "openai_harmony.HarmonyError: invalid tiktoken vocab file: expected token and rank, could not split on ' ' at "
        "line 67054",
    ],
)
def test_a_tiktoken_vocabulary_that_does_not_load_is_the_tokenizers(line: str) -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/vllm/entrypoints/openai/parser/harmony_utils.py", line 83, in get_encoding',
        "    _harmony_encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)",
        line,
    ]
    assert _classify(*lines) == (C.TOKENIZER_OR_TEMPLATE_ERROR, line)


def test_tiktoken_named_beside_no_fault_is_no_tokenizer_failure() -> None:
    line = "INFO 01-01 10:00:00 [harmony_utils.py:1] Loaded tiktoken vocab file o200k_base from the cache"
    assert classify(extract_evidence([line])).status is Status.PASS
