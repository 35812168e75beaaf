"""Families from issue 32's later fitting misses: vLLM's prefix with a package path, a message about one request."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.lines import parse
from orchestrator.model import Category

C = Category


@pytest.mark.parametrize(
    "line",
    [
        "ERROR 03-01 10:00:00 [v1/engine/core.py:901] RuntimeError: boom",
        "(EngineCore_DP0 pid=7) ERROR 03-01 10:00:00 [v1/worker/gpu_model_runner.py:12] RuntimeError: boom",
        "(Worker pid=9) ERROR 03-01 10:00:00 [some_plugin/.../platform.py:58] RuntimeError: boom",
        "ERROR 03-01 10:00:00 [engine.py:366] RuntimeError: boom",
    ],
)
def test_vllm_prefix_with_a_path_in_the_package_is_the_engines(line: str) -> None:
    p = parse(line)
    assert (p.level, p.body, p.style) == ("ERROR", "RuntimeError: boom", "vllm")


def test_an_accelerator_out_of_memory_behind_a_path_prefix_is_fatal() -> None:
    lines = ["(Worker_TP1 pid=5) ERROR 05-05 05:05:05 [v1/executor/multiproc_executor.py:700] Traceback (most recent "
             "call last):",
             "(Worker_TP1 pid=5) ERROR 05-05 05:05:05 [v1/executor/multiproc_executor.py:700]   File \"/a/b.py\", "
             "line 1, in alloc",
             "(Worker_TP1 pid=5) ERROR 05-05 05:05:05 [v1/executor/multiproc_executor.py:700] RuntimeError: XPU out "
             "of memory. Tried to allocate 1.00 GiB"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, lines[-1])


@pytest.mark.parametrize(
    ("about_one", "about_none"),
    [
        ("ERROR 01-01 10:00:00 [kv_transfer/x_connector.py:10] Potentially invalid KV blocks for unrecognized request "
         "cmpl-0123456789abcdef were retrieved.",
         "ERROR 01-01 10:00:00 [kv_transfer/x_connector.py:10] Potentially invalid KV blocks were retrieved."),
        ("ERROR 01-01 10:00:00 [router.py:5] Request timed out for request id=3fa85f64-5717-4562-b3fc-2c963f66afa6",
         "ERROR 01-01 10:00:00 [router.py:5] Request timed out"),
        ("ERROR 01-01 10:00:00 [p2p/conn.py:9] KV transfer failed for request req_9f8e7d6c5b4a: connection reset",
         "ERROR 01-01 10:00:00 [p2p/conn.py:9] KV transfer failed: connection reset"),
    ],
)
def test_an_error_about_one_named_request_is_the_requests(about_one: str, about_none: str) -> None:
    assert classify(extract_evidence([about_one])).category is C.HEALTHY
    assert classify(extract_evidence([about_none])).category is not C.HEALTHY


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: (gcloud.run.deploy) Revision 'srv-001' is not ready: the container failed to start and listen on the "
        "port within the allocated timeout.",
        "RuntimeError: the model server did not become healthy within 900 seconds",
        "Error: timed out waiting for the server to become ready (http://127.0.0.1:30000/health)",
        "ERROR 01-01 10:00:00 [launcher.py:9] container never came up within the configured deadline",
    ],
)
def test_a_passed_start_up_deadline_is_a_hang_whoever_states_it(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (C.HANG_OR_TIMEOUT, line)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 01-01 10:00:00 [api_server.py:1] Waiting for the server to start within 600 s",
        "[2025-01-01 10:00:00] The server is fired up and ready to roll!",
    ],
)
def test_waiting_for_a_start_up_is_no_deadline_passed(line: str) -> None:
    assert classify(extract_evidence([line])).category is C.HEALTHY


TB = ['Traceback (most recent call last):', '  File "/app/x.py", line 3, in main', "    run()"]


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: Check failed: m <= 128 : prefill must go through fused_moe_sm100_prefill; got m=4096",
        "RuntimeError: no matching dispatch for paged_attention_sm90a with head_dim=576",
        "ValueError: grouped_gemm_sm120: no valid specialization for tile shape (128, 256)",
    ],
)
def test_a_kernel_dispatch_gap_named_by_an_arch_specific_kernel_is_the_architectures(message: str) -> None:
    lines = [*TB, message]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, message)


@pytest.mark.parametrize(
    "message",
    [
        # An arch-looking run of letters inside a word is no architecture ...
        "ValueError: asm120x must go through the fallback path",
        # ... and a dispatch gap that names no architecture is not the GPU's.
        "RuntimeError: Check failed: m <= 128 : prefill must go through fused_moe_prefill; got m=4096",
    ],
)
def test_a_dispatch_gap_without_an_architecture_is_not_the_architectures(message: str) -> None:
    verdict = classify(extract_evidence([*TB, message]))
    assert verdict.category is not C.KERNEL_NOT_SUPPORTED_ON_ARCH


@pytest.mark.parametrize(
    "message",
    [
        "ValueError: While loading /data/adapters/chat, expected target modules in {'q_proj', 'k_proj'} but received "
        "['vision_model.blocks.0.attn.qkv']",
        "ValueError: mismatch of LoRA layer names: adapter has 'encoder.fc1', model has 'mlp.fc1'",
        "RuntimeError: LoRA adapter sql-v2: target modules ['lm_head', 'conv1'] not supported by this model",
    ],
)
def test_an_adapter_whose_modules_do_not_fit_the_model_is_a_weights_load_error(message: str) -> None:
    lines = [*TB, message]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.WEIGHTS_LOAD_ERROR, message)


def test_a_lora_rank_above_the_limit_stays_an_argument_problem() -> None:
    lines = [*TB, "ValueError: LoRA rank 64 is greater than max_lora_rank 16."]
    assert classify(extract_evidence(lines)).category is C.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "line",
    [
        "2026-01-01 10:00:00,000 - INFO - RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 3)",
        "[2026-01-01 10:00:00] WARNING worker.py:3: XPU out of memory. Tried to allocate 512.00 MiB",
        "INFO 01-01 10:00:00 [gpu_worker.py:9] RuntimeError: MPS out of memory (allocated 30 GB, max allowed 32 GB)",
    ],
)
def test_any_accelerators_out_of_memory_is_stated_at_any_level(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, line)


@pytest.mark.parametrize(
    "status",
    ["Quit (core dumped)", "Bus error (core dumped)", "Illegal instruction (core dumped)",
     "Floating point exception (core dumped)", "Trace/breakpoint trap (core dumped)"],
)
def test_a_shells_core_dump_status_after_a_quiet_start_is_a_failure_with_no_cause_named(status: str) -> None:
    lines = ["2026-01-01T10:00:00.000000Z  INFO launcher: Waiting for worker0 to signal that it's ready", status]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.UNKNOWN, status)
