"""Start-up failure families of multi-node runs, LoRA adapters, quantized kernels, graph capture and speculative
decoding, read through the whole harvest and verdict. Each case is written like the family in general (the wording
vLLM, SGLang, PEFT, Ray, PyTorch or the CUDA/HIP runtimes use), not copied from one log."""

from __future__ import annotations

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.model import Category

C = Category
TB = ["Traceback (most recent call last):", '  File "/srv/app/main.py", line 12, in main', "    start()"]


def _verdict(lines: list[str]) -> tuple[Category, str | None]:
    verdict = classify(extract_evidence(lines))
    return verdict.category, verdict.root_cause_line


@pytest.mark.parametrize(
    "line",
    [
        "ERROR 03-02 10:11:12 [core.py:700] ValueError: Loading lora ['support-bot failed: No adapter found for "
        "/mnt/adapters/support-bot/ckpt-120']",
        "ERROR 03-02 10:11:12 async_llm_engine.py:50] FileNotFoundError: [Errno 2] No such file or directory: "
        "'org/some-lora/adapter_config.json'",
        "ValueError: Can't find 'adapter_config.json' at '/models/loras/sql-adapter'",
        "OSError: /adapters/chat-v2 does not appear to contain adapter_model.safetensors: not found",
    ],
)
def test_a_lora_adapter_whose_files_are_missing_is_a_checkpoint_that_does_not_load(line: str) -> None:
    lines = [*TB, line]
    assert _verdict(lines) == (C.WEIGHTS_LOAD_ERROR, line)


def test_a_lora_adapter_refused_for_its_rank_is_still_an_argument_not_a_missing_file() -> None:
    lines = [*TB, "ValueError: LoRA rank 64 is greater than max_lora_rank 16."]
    assert _verdict(lines)[0] != C.WEIGHTS_LOAD_ERROR


@pytest.mark.parametrize(
    "line",
    [
        "ERROR 05-01 08:00:00 engine.py:400] Ray does not allocate any GPUs on the driver node. Consider adjusting the "
        "Ray placement group or running the driver on a GPU node.",
        # (Fewer GPUs in the placement group than the parallel sizes ask is the sizes' problem, taxonomy.md:
        # tests/knowledge/test_placement_mesh_and_loader_families.py.)
        "RuntimeError: The placement group for the engine workers could not be scheduled within 300 seconds",
    ],
)
def test_ray_unable_to_place_the_engine_gpus_is_the_distributed_runtime_failing(line: str) -> None:
    lines = ["INFO 05-01 07:59:58 llm_engine.py:200] Initializing an LLM engine with tensor_parallel_size=16",
             *TB, line]
    assert _verdict(lines) == (C.NCCL_ERROR, line)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA driver error (/build/jit/kernel_runtime.hpp:88): 200 (CUDA_ERROR_INVALID_IMAGE, device "
        "kernel image is invalid)",
        "torch.AcceleratorError: CUDA error: device kernel image is invalid",
        "RuntimeError: cudaErrorInvalidKernelImage while loading module fused_moe_sm90",
    ],
)
def test_a_kernel_image_the_device_rejects_is_a_kernel_this_architecture_lacks(line: str) -> None:
    lines = [*TB, '  File "/srv/venv/lib/python3.12/site-packages/kernels/gemm.py", line 40, in run', line]
    assert _verdict(lines) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, line)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: HIP error: operation not permitted on an event last recorded in a capturing stream",
        "torch.AcceleratorError: CUDA error: operation not permitted on an event last recorded in a capturing stream",
        "RuntimeError: HIP error: hipErrorStreamCaptureUnsupported",
    ],
)
def test_an_operation_forbidden_while_a_stream_captures_is_a_failed_capture(line: str) -> None:
    lines = ["[2026-01-01 00:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
             "[rank0]:[E101 00:00:05.1 ProcessGroupNCCL.cpp:1600] Process group watchdog thread terminated with "
             "exception:", line, "Fatal Python error: Aborted"]
    assert _verdict(lines) == (C.CUDA_GRAPH_CAPTURE_FAILED, line)


def test_the_watchdog_notice_of_an_error_or_timeout_yields_to_the_line_saying_which() -> None:
    notice = ("[rank2]:[E305 10:00:00.1 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank 2] Exception (either an "
              "error or timeout) detected by watchdog at work: 77, last enqueued NCCL work: 77, last completed NCCL "
              "work: 76.")
    which = ("[rank2]:[E305 10:00:00.1 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 Rank 2] Timeout at NCCL work: 77, "
             "last enqueued NCCL work: 77, last completed NCCL work: 76.")
    after = ("[rank2]:[E305 10:00:00.1 ProcessGroupNCCL.cpp:630] [Rank 2] Some NCCL operations have failed or timed "
             "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
             "corrupted/incomplete data.")
    assert _verdict([notice, which, after]) == (C.NCCL_ERROR, which)
    # An NCCL error stated before the watchdog's notice still is the cause.
    error = ("[rank2]:[E305 09:59:59.9 ProcessGroupNCCL.cpp:1400] NCCL error: remote process exited or there was a "
             "network error")
    assert _verdict([error, notice, which]) == (C.NCCL_ERROR, error)


def test_nccls_warn_line_that_states_the_failure_outranks_the_error_class_it_returns() -> None:
    # NCCL returns only the error's class and points at its debug output; the WARN line before it says what failed.
    warn = ("node2:3996242:3996242 [2] misc/socket.cc:578 NCCL WARN socketPollConnect: connect to 10.0.0.7<54709> "
            "returned Connection refused, exceeded error retry count after 35 attempts")
    raised = "RuntimeError: NCCL error: remote process exited or there was a network error"
    assert _verdict([warn, *TB, raised]) == (C.NCCL_ERROR, warn)
    system = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
    cuda = "node1:1234:5678 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'invalid device function'"
    assert _verdict([cuda, *TB, system]) == (C.NCCL_ERROR, cuda)


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: The quantization method gptq_marlin is not supported for the current GPU. Minimum capability: 80. "
        "Current capability: 70.",
        "ValueError: Marlin does not support weight_bits = uint4b8. Only types = [] are supported (for group_size = "
        "64, min_capability = 75, zp = True)",
        "RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 89. ', "
        "'Current capability: 86.')",
    ],
)
def test_a_kernel_refused_for_the_gpus_compute_capability_is_the_architectures(line: str) -> None:
    lines = [*TB, '  File "/srv/venv/lib/python3.12/site-packages/quant/config.py", line 88, in from_config', line]
    assert _verdict(lines) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, line)


def test_a_refusal_for_the_model_that_names_no_capability_stays_a_configuration() -> None:
    line = "ValueError: Quantization scheme fp8 is not supported for this model."
    assert _verdict([*TB, line]) == (C.UNSUPPORTED_CONFIG, line)


def _triton_traceback(innermost: str, exception: str) -> list[str]:
    return [*TB, '  File "/srv/venv/lib/python3.12/site-packages/vllm/lora/ops/triton_ops/lora_shrink.py", line 90, '
            "in _lora_shrink", "    _lora_shrink_kernel[grid](",
            '  File "/srv/venv/lib/python3.12/site-packages/triton/runtime/jit.py", line 330, in <lambda>',
            "    return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)", innermost,
            "    self.launch(*args, **kwargs)", exception]


def test_an_error_raised_by_tritons_kernel_launcher_is_no_failed_build() -> None:
    lines = _triton_traceback('  File "/srv/venv/lib/python3.12/site-packages/triton/backends/nvidia/driver.py", '
                              "line 444, in __call__", "ValueError: Pointer argument (at 2) cannot be accessed from "
                              "Triton (cpu tensor?)")
    assert _verdict(lines)[0] == C.PYTHON_EXCEPTION_OTHER


def test_an_error_raised_while_triton_compiles_is_still_a_failed_build() -> None:
    lines = _triton_traceback('  File "/srv/venv/lib/python3.12/site-packages/triton/backends/nvidia/compiler.py", '
                              "line 380, in make_cubin", "RuntimeError: Internal Triton PTX codegen error")
    assert _verdict(lines)[0] == C.KERNEL_JIT_ERROR


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-3:4411:4411 [2] enqueue.cc:1100 NCCL WARN Cuda failure 'dependency created on uncaptured work in "
        "another stream'",
        "gpu-node-3:4411:4411 [2] enqueue.cc:1100 NCCL WARN Cuda failure 900 'operation not permitted when stream is "
        "capturing'",
    ],
)
def test_a_stream_capture_violation_is_a_failed_capture_whoever_reports_it(line: str) -> None:
    lines = ["INFO 04-01 10:00:00 model_runner.py:900] Capturing the model for CUDA graphs.", line,
             "gpu-node-3:4411:4411 [2] NCCL INFO enqueue.cc:1200 -> 1", *TB,
             "RuntimeError: CUDA error: operation failed due to a previous error during capture"]
    assert _verdict(lines) == (C.CUDA_GRAPH_CAPTURE_FAILED, line)


def test_an_nccl_cuda_failure_that_is_no_capture_violation_stays_an_nccl_error() -> None:
    line = "gpu-node-3:4411:4411 [2] transport/p2p.cc:200 NCCL WARN Cuda failure 'invalid argument'"
    assert _verdict([line, "gpu-node-3:4411:4411 [2] NCCL INFO transport.cc:150 -> 1"]) == (C.NCCL_ERROR, line)


def test_a_stream_made_to_depend_on_a_capturing_stream_is_a_failed_capture() -> None:
    line = "RuntimeError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream"
    assert _verdict([*TB, line]) == (C.CUDA_GRAPH_CAPTURE_FAILED, line)


@pytest.mark.parametrize(
    "line",
    [
        "E0412 11:22:33.000100  5120 worker_pool.cpp:280] Worker: Process failed for slice (opcode: 0, local_nic: "
        "mlx5_2, peer_nic: 10.1.1.9:16000@mlx5_2, retry_cnt: 1): transport retry counter exceeded",
        "E0412 11:22:33.000100  5120 worker_pool.cpp:280] Worker: Process failed for slice (opcode: 1, local_nic: "
        "mlx5_bond_0, retry_cnt: 0): local protection error",
        "[2026-04-12 11:22:33] ERROR rdma_endpoint.py:90: work completion failed: IBV_WC_REM_ACCESS_ERR on qp 77",
    ],
)
def test_an_rdma_work_request_completed_in_error_is_the_network_under_the_distributed_runtime(line: str) -> None:
    assert _verdict(["[2026-04-12 11:22:30] Prefill batch, #new-seq: 1, #new-token: 512", line]) == (C.NCCL_ERROR, line)


def test_an_rdma_success_status_is_no_failure() -> None:
    lines = ["[2026-04-12 11:22:30] INFO rdma_endpoint.py:80: completion IBV_WC_SUCCESS on qp 77",
             "[2026-04-12 11:22:31] The server is fired up and ready to roll!"]
    assert _verdict(lines)[0] == C.HEALTHY


def test_a_jit_build_that_fails_for_the_architecture_names_the_architecture_as_its_root() -> None:
    prefix = "(Worker_TP0 pid=900) ERROR 02-02 02:02:02 [multiproc_executor.py:600] "
    lines = [prefix + "triton.compiler.errors.CompilationError: at 12:4:", prefix + "def _fp8_gemm_kernel(",
             prefix + "    ^",
             prefix + "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are "
             "('fp8e4b15', 'fp8e5')\")"]
    category, root = _verdict(lines)
    assert category in (C.KERNEL_NOT_SUPPORTED_ON_ARCH, C.KERNEL_JIT_ERROR) and root == lines[-1]


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: The output size is not aligned with the quantized weight shape. This can be caused by too large "
        "tensor parallel size.",
        "ERROR 05-06 07:08:09 [core.py:700] ValueError: The input size is not aligned with the quantized weight shape.",
        "RuntimeError: weight block of 128 rows cannot be split: this is likely due to a too large tensor parallel "
        "size for this checkpoint",
    ],
)
def test_a_shape_the_parallel_size_splits_unevenly_is_an_argument_for_this_model(line: str) -> None:
    assert _verdict([*TB, line]) == (C.INVALID_ARGUMENT, line)


def test_a_warning_about_parallel_size_alone_is_no_failure_cause() -> None:
    lines = ["INFO 05-06 07:08:09 [config.py:1] Using tensor parallel size 8.", *TB,
             "ValueError: unexpected widget in the frobnicator"]
    assert _verdict(lines)[0] == C.PYTHON_EXCEPTION_OTHER


def test_a_compiler_that_does_not_know_the_target_is_a_failed_build_not_the_architectures_refusal() -> None:
    lines = [*TB, "RuntimeError: Error building extension 'fused_rope_ops'",
             "nvcc fatal   : Unsupported gpu architecture 'compute_110a'", "ninja: build stopped: subcommand failed."]
    assert _verdict(lines) == (C.KERNEL_JIT_ERROR, "RuntimeError: Error building extension 'fused_rope_ops'")


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: No supported CUDA architectures found for major versions [12].",
        "ValueError: no supported architecture among ['sm_90a', 'sm_100a'] for this GPU (sm_121)",
    ],
)
def test_a_library_that_finds_no_supported_architecture_refuses_the_gpu(line: str) -> None:
    assert _verdict([*TB, line]) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, line)


def test_no_supported_backend_without_an_architecture_is_not_about_the_gpu() -> None:
    assert _verdict([*TB, "ValueError: No supported attention backend found for this model"])[0] != (
        C.KERNEL_NOT_SUPPORTED_ON_ARCH)


@pytest.mark.parametrize(
    "line",
    [
        "TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'",
        "TypeError: ServerArgs.__init__() got an unexpected keyword argument 'enable_mixed_chunk_prefill'",
        "TypeError: LLM.__init__() got an unexpected keyword argument 'swap_space'",
    ],
)
def test_the_engines_argument_class_refusing_a_keyword_is_an_unrecognised_argument(line: str) -> None:
    assert _verdict([*TB, line]) == (C.INVALID_ARGUMENT, line)


def test_an_unexpected_keyword_elsewhere_is_no_argument_of_the_engine() -> None:
    line = "TypeError: LlamaAttention.forward() got an unexpected keyword argument 'position_ids'"
    assert _verdict([*TB, line])[0] == C.PYTHON_EXCEPTION_OTHER


def test_an_npu_core_refused_by_the_memory_protection_unit_is_an_illegal_memory_access() -> None:
    line = ("    The extend info: errcode:(0, 0x800000, 0) errorStr: The MPU address access is invalid. "
            "fixp_error0 info: 0x1, subErrType:4.[FUNC:ProcessStarsCoreErrorInfo][FILE:device_error_core_proc.cc]")
    lines = ["[rank0]:[W101 10:00:00.000 compiler_depend.ts:57] Warning: EZ9999: Inner Error!", line,
             "    Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr]"]
    assert _verdict(lines) == (C.ILLEGAL_MEMORY_ACCESS, line)


@pytest.mark.parametrize(
    "line",
    [
        "tvm.error.InternalError: Check failed: hidden_states.dtype() == dl_bfloat16 (float16 vs. bfloat16) : "
        "routed MoE expects bf16 activations",
        "RuntimeError: FP4 grouped GEMM: the weights must be nvfp4, got uint8",
    ],
)
def test_a_kernel_backend_refusing_the_dtype_it_is_given_is_an_unsupported_configuration(line: str) -> None:
    assert _verdict([*TB, line]) == (C.UNSUPPORTED_CONFIG, line)


def test_a_value_that_must_be_a_number_is_no_dtype_refusal() -> None:
    line = "ValueError: gpu_memory_utilization must be between 0 and 1"
    assert _verdict([*TB, line])[0] != C.UNSUPPORTED_CONFIG


def test_a_cuda_warning_met_while_cleaning_up_is_no_root_beside_the_error_raised() -> None:
    raised = "  what():  CUDA error: an illegal memory access was encountered"
    lines = ["[rank1]:[W305 10:00:00.1 CUDAGuardImpl.h:119] Warning: CUDA warning: an illegal memory access was "
             "encountered (function destroyEvent)",
             "terminate called after throwing an instance of 'c10::Error'", raised]
    assert _verdict(lines) == (C.ILLEGAL_MEMORY_ACCESS, raised)


@pytest.mark.parametrize("lib", ["GLIBC_2.34", "GLIBCXX_3.4.30", "CXXABI_1.3.15"])
def test_a_compiled_extension_needing_a_newer_system_library_is_an_import_error_even_as_a_warning(lib: str) -> None:
    line = (f"WARNING 01-02 03:04:05 _custom_ops.py:14] Failed to import from vllm._C with ImportError(\"/lib/x86_64/"
            f"libstdc++.so.6: version `{lib}' not found (required by /opt/venv/vllm/_C.abi3.so)\")")
    assert _verdict(["INFO 01-02 03:04:00 api_server.py:1] vLLM API server version 0.5.1", line]) == (
        C.IMPORT_ERROR, line)


@pytest.mark.parametrize(
    "line",
    [
        "[2026-01-02 03:04:05] Error in parse_streaming_increment: Unterminated string starting at: line 1 column 9",
        "[2026-01-02 03:04:05] Error in detect_and_parse: Extra data: line 1 column 40 (char 39)",
    ],
)
def test_a_tool_call_parser_failing_on_one_request_is_survived(line: str) -> None:
    ready = "[2026-01-02 03:00:00] The server is fired up and ready to roll!"
    assert _verdict([ready, line])[0] == C.HEALTHY


def test_a_negative_kv_cache_budget_logged_at_info_is_the_cause() -> None:
    line = "(EngineCore pid=42) INFO 03-04 05:06:07 [gpu_worker.py:300] Available KV cache memory: -0.87 GiB"
    lines = [line, "(EngineCore pid=42) ERROR 03-04 05:06:07 [core.py:700] EngineCore failed to start.", *TB,
             "RuntimeError: Engine core initialization failed. See root cause above."]
    assert _verdict(lines) == (C.KV_CACHE_TOO_SMALL, line)


def test_a_positive_kv_cache_budget_is_no_failure() -> None:
    lines = ["(EngineCore pid=42) INFO 03-04 05:06:07 [gpu_worker.py:300] Available KV cache memory: 21.30 GiB",
             "(APIServer pid=1) INFO 03-04 05:06:30 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"]
    assert _verdict(lines)[0] == C.HEALTHY


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: create:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:89 HCCL function error: "
        "HcclCommInitRootInfo(numRanks, &rootInfo, rank, &(comm->hcclComm_)), error code is 7",
        "[ERROR] 2026-01-02-03:04:05 (PID:11, Device:3, RankID:-1) ERR02200 DIST call hccl api failed.",
    ],
)
def test_ascends_collective_library_failing_is_the_distributed_runtime(line: str) -> None:
    assert _verdict([*TB, line]) == (C.NCCL_ERROR, line)


def test_a_model_type_the_installed_transformers_does_not_map_is_an_unsupported_model() -> None:
    site = "/usr/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py"
    lines = ["Traceback (most recent call last):", f'  File "{site}", line 1360, in from_pretrained',
             '    config_class = CONFIG_MAPPING[config_dict["model_type"]]',
             f'  File "{site}", line 1048, in __getitem__', "    raise KeyError(key)", "KeyError: 'qwen9_moe'"]
    assert _verdict(lines) == (C.UNSUPPORTED_CONFIG, lines[-1])
    # The same KeyError raised elsewhere says nothing of the model's type.
    assert _verdict([*TB, "KeyError: 'qwen9_moe'"])[0] is C.PYTHON_EXCEPTION_OTHER


@pytest.mark.parametrize(
    "line",
    [
        "tvm.error.InternalError: Assertion error (/deepgemm/csrc/apis/layout.hpp:59): Unknown SF transformation",
        "RuntimeError: Assertion error (csrc/apis/../utils/layout.hpp:52): Unknown recipe",
        "RuntimeError: Assertion error (csrc/apis/sparse.hpp:88): Unknown kernel or architecture",
    ],
)
def test_a_kernel_librarys_per_architecture_dispatch_falling_through_is_the_architecture(line: str) -> None:
    assert _verdict([*TB, line]) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, line)


def test_the_same_librarys_other_unreachable_branches_are_no_architecture() -> None:
    line = "RuntimeError: Assertion error (csrc/jit_kernels/heuristics/common.hpp:40): Unknown dtype"
    assert _verdict([*TB, line])[0] is not C.KERNEL_NOT_SUPPORTED_ON_ARCH


_WATCHDOG = "[E ProcessGroupNCCL.cpp:1536] [PG 0 Rank 2] NCCL watchdog thread terminated with exception: CUDA error: "


@pytest.mark.parametrize(
    ("cause", "category"),
    [
        # The watchdog reports what the collective's stream met: a cause with a row of its own decides ...
        ("an illegal memory access was encountered", C.ILLEGAL_MEMORY_ACCESS),
        ("operation not permitted when stream is capturing", C.CUDA_GRAPH_CAPTURE_FAILED),
        ("out of memory", C.CUDA_OOM),
        # ... and a CUDA error that names none stays the distributed runtime's report.
        ("unspecified launch failure", C.NCCL_ERROR),
    ],
)
def test_the_nccl_watchdog_reporting_a_cuda_error_yields_to_the_error_it_quotes(cause: str, category: Category) -> None:
    line = _WATCHDOG + cause
    assert _verdict([line, "Fatal Python error: Aborted"]) == (category, line)


@pytest.mark.parametrize("function", ["_load_w13", "_load_w2"])
def test_a_shape_error_in_the_moe_weight_loader_is_the_checkpoint_not_fitting(function: str) -> None:
    lines = [*TB, '  File "/site/vllm/model_executor/layers/fused_moe/layer.py", line 540, in ' + function,
             "    loaded_weight = loaded_weight.narrow(shard_dim, shard_size * tp_rank, shard_size)",
             "RuntimeError: start (512) + length (512) exceeds dimension size (768)."]
    assert _verdict(lines) == (C.WEIGHTS_LOAD_ERROR, lines[-1])


_HSA = (":0:rocdevice.cpp :2982: 998877 us: Callback: Queue 0x7f0000200000 aborting with error : "
        "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016")


def test_a_rocm_kernels_hardware_exception_is_a_kernel_fault() -> None:
    assert _verdict([_HSA, "Fatal Python error: Aborted"]) == (C.ILLEGAL_MEMORY_ACCESS, _HSA)


def test_a_device_assertion_ending_in_the_same_trap_says_more() -> None:
    assertion = ("/src/aten/native/hip/IndexKernel.hip:94: operator(): block: [3,0,0], thread: [7,0,0] Assertion "
                 "`-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.")
    assert _verdict([assertion, _HSA, "Fatal Python error: Aborted"]) == (C.CUDA_DEVICE_ASSERT, assertion)


def test_the_compilers_own_diagnostic_outranks_the_build_summary_printed_before_it() -> None:
    cache = "/root/.cache/flashinfer/0.6.1+cu128/90a"
    diagnostic = (f"{cache}/generated/batch_decode_head_dim_128/batch_decode.cu:3:10: fatal error: "
                  "flashinfer/attention/decode.cuh: No such file or directory")
    lines = [*TB, f"subprocess.CalledProcessError: Command '['ninja', '-v', '-C', '{cache}/cached_ops/batch_decode']' "
             "returned non-zero exit status 1.", "RuntimeError: Ninja build failed. Ninja output:",
             f"FAILED: {cache}/cached_ops/batch_decode/batch_decode.cuda.o", diagnostic, "compilation terminated."]
    assert _verdict(lines) == (C.KERNEL_JIT_ERROR, diagnostic)
