"""Families told by their words (vocabulary.py and the rows built from it), read through the harvest and verdict."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.vocabulary import names_argument
from orchestrator.model import Category
from tests.paths import require_fixtures

require_fixtures()

C = Category
TB = ['Traceback (most recent call last):', '  File "/app/x.py", line 3, in main', "    run()"]


@pytest.mark.parametrize(
    ("lines", "category", "root"),
    [
        # pydantic config validation: the indented `Value error,` line continues the exception and names the cause.
        ([*TB, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
          "  Value error, max_model_len (40960) is greater than the derived max_model_len (32768). "
          "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"], C.INVALID_ARGUMENT, -1),
        # A rejected value naming a server argument, in either spelling.
        ([*TB, "ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768)."],
         C.INVALID_ARGUMENT, -1),
        ([*TB, "ValueError: --limit-mm-per-prompt must be a mapping of modality to count"], C.INVALID_ARGUMENT, -1),
        # Architecture outranks a generic "not supported".
        ([*TB, "RuntimeError: Assertion error (csrc/apis/attention.hpp:211): Unsupported architecture"],
         C.KERNEL_NOT_SUPPORTED_ON_ARCH, -1),
        ([*TB, "ValueError: fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e5',)"],
         C.KERNEL_NOT_SUPPORTED_ON_ARCH, -1),
        ([*TB, "RuntimeError: This kernel is only supported on SM100 GPUs"], C.KERNEL_NOT_SUPPORTED_ON_ARCH, -1),
        ([*TB, "NameError: name 'deep_gemm' is not defined"], C.KERNEL_NOT_SUPPORTED_ON_ARCH, -1),
        # ... while a model's architecture is the model, not the GPU.
        ([*TB, "ValueError: Unsupported architectures: FooForCausalLM"], C.UNSUPPORTED_CONFIG, -1),
        # A compiled extension's op namespace lacks the op: the extension and its caller do not match.
        ([*TB, "AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute 'fp8_blockwise_scaled_mm'"],
         C.IMPORT_ERROR, -1),
        # The distributed runtime below NCCL, and a c10d socket that waited in vain.
        (["[E socket.cpp:1013] [c10d] The client socket has failed to connect to [node-1]:29500 "
          "(errno: 113 - No route to host)."], C.NCCL_ERROR, 0),
        ([*TB, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] connectFullMesh failed"],
         C.NCCL_ERROR, -1),
        (["[E1205 10:00:00.000000 42 socket.cpp:1013] [c10d] waitForInput: poll for socket SocketImpl(fd=3) "
          "returned 0, likely a timeout"], C.HANG_OR_TIMEOUT, 0),
        # Failures stated at a level that looks harmless.
        (["h1:139:1092 [7] enqueue.cc:1556 NCCL WARN Cuda failure 'invalid device function'"], C.NCCL_ERROR, 0),
        (["2025-01-01 10:00:00,000 - INFO - torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"],
         C.CUDA_OOM, 0),
        (["(raylet) [2025-01-02 10:00:00,000 W 1 1] (raylet) node_manager.cc:3000: 1 Workers (tasks / actors) killed "
          "due to memory pressure (OOM)"], C.PROCESS_KILLED, 0),
        # A container runtime's prefix on every line of a traceback.
        ([f"2026-01-01T10:00:00.{i:06d}+00:00 stderr F {x}" for i, x in
          enumerate([*TB, "KeyError: 'choices'"])], C.PYTHON_EXCEPTION_OTHER, -1),
        # A follow-up raised as an exception says only that the cause is elsewhere.
        ([*TB, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"],
         C.UNKNOWN, -1),
        # A wrapper below the cause does not take its place.
        (["[2025-01-01 10:00:00] Traceback (most recent call last):", '  File "/a/b.py", line 1, in f', "    g()",
          "KeyError: 'choices'", "[2025-01-01 10:00:01] Initialization failed. warmup error: see above"],
         C.PYTHON_EXCEPTION_OTHER, 3),
    ],
)
def test_family_decides(lines: list[str], category: Category, root: int) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (category, lines[root])


@pytest.mark.parametrize(
    "line",
    [
        "[2025-01-01 10:00:00 TP0] Cascade attention is not supported on this model, disabling it.",
        "INFO 01-01 10:00:00 [gpu_model_runner.py:1] max_num_batched_tokens is set to 8192",
        "h1:1:1 [0] NCCL INFO NET/IB : No device found.",
        "[2025-01-01 10:00:00] The server is fired up and ready to roll!",
    ],
)
def test_progress_lines_stay_healthy(line: str) -> None:
    assert classify(extract_evidence([line])).category is C.HEALTHY


def test_names_argument_takes_both_spellings_and_only_whole_names() -> None:
    assert names_argument("--max-model-len 99999 is too long")
    assert names_argument("max_model_len=99999 is too long")
    assert not names_argument("the maximum model length is too long")
    assert not names_argument("a.max_model_len_x is too long")


@pytest.mark.parametrize(
    ("lines", "category", "root"),
    [
        # Syslog writes control characters as `#033[..m` and `#015`; a long line wrapped by the terminal.
        (["#033[2m#033[33m(raylet)#033[0m [DATE] (raylet) node_manager.cc:3007: 2 Workers (tasks /",
          " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node"],
         C.PROCESS_KILLED, 1),
        # Ray's memory monitor, in its own words.
        (["Memory on the node (IP: 10.0.0.1, ID: abc) where the task (actor ID: 1, name=RayWorkerVllm.__init__, "
          "pid=308, memory used=11.15GB) was running was 12.49GB / 13.15GB (0.950003), which exceeds the memory "
          "usage threshold of 0.95. Ray killed this worker (ID: 7) because it was the most recently scheduled task"],
         C.PROCESS_KILLED, 0),
    ],
)
def test_carried_and_wrapped_statements(lines: list[str], category: Category, root: int) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (category, lines[root])


def test_a_healthy_vllm_log_without_uvicorns_running_line_shows_its_application_startup() -> None:
    lines = ["INFO 03-18 08:51:39 [launcher.py:34] Route: /v1/models, Methods: GET",
             "INFO:     Started server process [7]", "INFO:     Waiting for application startup.",
             "INFO:     Application startup complete.",
             "INFO 03-18 08:57:15 [logger.py:39] Received request chatcmpl-1"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.HEALTHY, lines[3])


def test_an_error_level_traceback_header_is_no_cause_of_its_own() -> None:
    lines = ["ERROR 12-17 10:47:07 [core.py:396] EngineCore failed to start.",
             "ERROR 12-17 10:47:07 [core.py:396] Traceback (most recent call last):"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.UNKNOWN, lines[0])


@pytest.mark.parametrize(
    ("message", "category"),
    [
        # ROCm's words for the CUDA families.
        ("RuntimeError: HIP error: invalid device function", C.KERNEL_NOT_SUPPORTED_ON_ARCH),
        ("Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f00. Reason: Unknown.",
         C.ILLEGAL_MEMORY_ACCESS),
        ("RuntimeError: RCCL error: unhandled system error", C.NCCL_ERROR),
        # NCCL's report of a CUDA call that ran out of memory is the memory, not the communicator.
        ("h1:139:1092 [7] enqueue.cc:1556 NCCL WARN Cuda failure 2 'out of memory'", C.CUDA_OOM),
        # An illegal instruction is the kernel touching what it must not, like an illegal address.
        ("torch.AcceleratorError: CUDA error: an illegal instruction was encountered", C.ILLEGAL_MEMORY_ACCESS),
        # torchrun and the kernel capitalise the signal.
        ("Signal 9 (SIGKILL) received by PID 1234", C.PROCESS_KILLED),
        ("torch.AcceleratorError: HIP error: unspecified launch failure", C.UNKNOWN),
        # A chat template the tokenizer lacks.
        ("vllm.entrypoints.chat_utils.ChatTemplateResolutionError: As of transformers v4.44, default chat template "
         "is no longer allowed, so you must provide a chat template if the tokenizer does not define one.",
         C.TOKENIZER_OR_TEMPLATE_ERROR),
    ],
)
def test_platform_words_of_a_family(message: str, category: Category) -> None:
    assert classify(extract_evidence([message])).category is category


def test_only_requests_failing_is_no_server_failure() -> None:
    rejected = ("(APIServer pid=1) ERROR 04-28 14:17:50 [serving_chat.py:257] ValueError: 'max_tokens' or "
                "'max_completion_tokens' is too large: 8192.")
    assert classify(extract_evidence([rejected])).category is C.HEALTHY
    # A failure of the server beside it still names the cause.
    died = "(EngineCore pid=2) ERROR 04-28 14:17:51 [core.py:1] torch.OutOfMemoryError: CUDA out of memory."
    verdict = classify(extract_evidence([rejected, died]))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, died)


def test_an_unrecognised_processor_is_a_processor_load_failure() -> None:
    line = "ValueError: Unrecognized image processor in /models/x. Should have a `image_processor_type` key"
    assert classify(extract_evidence([line])).category is C.TOKENIZER_OR_TEMPLATE_ERROR


def test_an_extension_that_does_not_load_is_an_import_failure_at_any_level() -> None:
    broken = ("WARNING 05-30 10:51:41 [_custom_ops.py:21] Failed to import from vllm._C with ImportError(\"/x/_C.so: "
              "undefined symbol: _ZN3c104cuda9SetDeviceEi\")")
    assert classify(extract_evidence([broken])).category is C.IMPORT_ERROR
    # An optional module that is simply absent is a warning like any other.
    absent = ("WARNING 05-30 10:51:41 [_custom_ops.py:21] Failed to import from vllm._rocm_C with "
              "ModuleNotFoundError(\"No module named 'vllm._rocm_C'\")")
    assert classify(extract_evidence([absent])).category is C.HEALTHY


def test_a_device_assert_raised_while_sampling_from_probabilities_is_nan_in_probs() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/sgl/python/sglang/srt/layers/sampler.py", line 600, in sampling_from_probs_torch',
             "    sampled_index = torch.multinomial(probs, num_samples=1)",
             "torch.AcceleratorError: CUDA error: device-side assert triggered"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.NAN_IN_PROBS, lines[-1])


def test_an_nccl_peer_with_no_route_is_a_distributed_failure() -> None:
    line = ("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned "
            "113(No route to host) errno 115(Operation now in progress)")
    verdict = classify(extract_evidence([line, "[2025-02-24 14:09:34 TP14] Scheduler hit an exception: Traceback (most "
                                         "recent call last):"]))
    assert (verdict.category, verdict.root_cause_line) == (C.NCCL_ERROR, line)


def test_not_support_in_its_broken_english_form_is_unsupported() -> None:
    assert classify(extract_evidence(["RuntimeError: Not support device type: cpu"])).category is C.UNSUPPORTED_CONFIG


def test_a_gpu_architecture_a_library_does_not_know_is_an_architecture_refusal() -> None:
    # A chained KeyError: the bare key first, then the library's own words naming the unknown gfx id; the
    # words decide, although the raise happened inside a JIT package's directory.
    lines = ["Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/lib/jit/utils/chip_info.py", line 63, in get_gfx',
             "    return gfx_mapping[name]",
             "KeyError: 'gfx1101'",
             "During handling of the above exception, another exception occurred:",
             "Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/lib/jit/utils/chip_info.py", line 65, in get_gfx',
             "    raise KeyError(",
             "KeyError: \"Unknown GPU architecture: gfx1101. Supported architectures: ['gfx90a', 'gfx942']\""]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, lines[-1])


@pytest.mark.parametrize(
    ("message", "arch"),
    [
        ("ValueError: unrecognized device gfx90a", True),
        ("RuntimeError: Unknown CUDA arch sm_120", True),
        # "unknown" far from the architecture word, or about a model's architecture, is no refusal of the GPU.
        ("RuntimeError: CUDA error: unknown error on node a100-7 (NVIDIA A100)", False),
        ("ValueError: Unknown model architecture: FooForCausalLM", False),
    ],
)
def test_unknown_names_the_architecture_only_when_it_qualifies_it(message: str, arch: bool) -> None:
    category = classify(extract_evidence([message])).category
    assert (category is C.KERNEL_NOT_SUPPORTED_ON_ARCH) is arch, category


def test_a_config_validation_error_that_refuses_a_combination_is_unsupported() -> None:
    refused = [*TB, "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
               "Value error, Model Runner V2 does not yet support: ngram speculative decoding [type=value_error, "
               "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"]
    verdict = classify(extract_evidence(refused))
    assert (verdict.category, verdict.root_cause_line) == (C.UNSUPPORTED_CONFIG, refused[-1])
    # A value rejected for itself stays an argument error.
    rejected = [*refused[:-1], "  Value error, max_model_len (40960) is greater than the derived max_model_len "
                "(32768). [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"]
    assert classify(extract_evidence(rejected)).category is C.INVALID_ARGUMENT


def test_a_traceback_read_from_the_system_journal_keeps_its_cause() -> None:
    prefix = "Aug 19 18:34:27 node vllm[8727]: (EngineCore pid=8727) ERROR 08-19 18:34:27 [core.py:1349] "
    lines = [prefix + x for x in ["Traceback (most recent call last):",
                                  '  File "/opt/vllm/model_executor/models/qwen3.py", line 3, in load_weights',
                                  "    param = params_dict[name]", "KeyError: 'layers.0.mlp.experts.w2_weight'"]]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.WEIGHTS_LOAD_ERROR, lines[-1])


@pytest.mark.parametrize(
    "wrap",
    [
        lambda x: "0: " + x,  # srun --label
        lambda x: "gpu-node-3: " + x,  # a parallel shell's host
        lambda x: '{"log":' + json.dumps(x + "\n") + ',"stream":"stderr","time":"2025-01-01T10:00:00Z"}',
    ],
)
def test_a_traceback_under_a_launcher_or_log_store_keeps_its_cause(wrap: Callable[[str], str]) -> None:
    lines = [wrap(x) for x in ["Traceback (most recent call last):",
                               '  File "/opt/vllm/model_executor/models/qwen3.py", line 3, in load_weights',
                               "    param = params_dict[name]", "KeyError: 'layers.0.mlp.experts.w2_weight'"]]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.WEIGHTS_LOAD_ERROR, lines[-1])


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # The exit status decides: -9 is a kill, -3 is a death whose cause is elsewhere; the hint that names SIGKILL
        # and the OOM killer as one possibility kills nothing.
        ("RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a "
         "common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.", C.PROCESS_KILLED),
        ("RuntimeError: Rank 0 scheduler died during initialization (exit code: -3). If exit code is -9 (SIGKILL), a "
         "common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.", C.UNKNOWN),
        ("subprocess.CalledProcessError: Command '['python3', '-m', 'sglang.launch_server']' returned non-zero exit "
         "status 137.", C.PROCESS_KILLED),
        ("The worker was killed by the OOM killer", C.PROCESS_KILLED),
    ],
)
def test_a_kill_is_stated_not_supposed(line: str, category: Category) -> None:
    assert classify(extract_evidence([line])).category is category


def test_a_client_told_its_request_was_refused_shows_a_server_that_answered() -> None:
    lines = ["[2025-01-01 10:00:00] Decode batch. #running-req: 1, #token: 80, token usage: 0.01, #queue-req: 0",
             "(Trainer pid=7) Error: Client error '400 Bad Request' for url 'http://10.0.0.1:30000/generate'",
             "(Trainer pid=7) requests.exceptions.HTTPError: 404 Client Error: Not Found for url: http://10.0.0.1/x",
             '[2025-01-01 10:00:01] INFO:     10.0.0.2:4000 - "POST /generate HTTP/1.1" 400 Bad Request']
    assert classify(extract_evidence(lines)).category is C.HEALTHY
    # A server error the client saw is no refusal of the request alone.
    failed = [*lines[:1], "(Trainer pid=7) Error: Server error '500 Internal Server Error' for url 'http://x/generate'"]
    assert classify(extract_evidence(failed)).category is not C.HEALTHY


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # A checkpoint that cannot be had: its config missing, or the hub out of reach with nothing cached.
        ("FileNotFoundError: [Errno 2] No such file or directory: '/models/llama/config.json'", C.WEIGHTS_LOAD_ERROR),
        ("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached "
         "files and it looks like org/m is not the path to a directory containing a file named config.json.",
         C.WEIGHTS_LOAD_ERROR),
        # Another file's config is not the checkpoint's.
        ("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/app_config.json'", C.PYTHON_EXCEPTION_OTHER),
    ],
)
def test_a_checkpoint_that_cannot_be_had(line: str, category: Category) -> None:
    assert classify(extract_evidence([line])).category is category


@pytest.mark.parametrize("last", ["Cuda failure 'out of memory'", "Failed to CUDA malloc 134217728 bytes"])
def test_the_cuda_failure_behind_an_nccl_error_is_its_cause(last: str) -> None:
    lines = [*TB, "torch.distributed.DistBackendError: NCCL error in: ../NCCLUtils.hpp:275, unhandled cuda error (run "
             "with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
             "ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:", last]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (C.CUDA_OOM, lines[-1])


@pytest.mark.parametrize(
    ("lines", "category", "root"),
    [
        # A Hugging Face repo the server may not read: the checkpoint cannot be fetched, whatever raised it.
        (["Cannot access gated repo for url https://huggingface.co/org/model/resolve/main/config.json.",
          "Access to model org/model is restricted. You must be authenticated to access it."],
         C.WEIGHTS_LOAD_ERROR, 0),
        ([*TB, "OSError: You are trying to access a gated repo."], C.WEIGHTS_LOAD_ERROR, -1),
        # A Ray task's header names the remote method it ran; the method's name is code, not a runtime failure.
        (["(Trainer pid=1) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
          "ray::Engine.init_process_group() (pid=2, ip=0.0.0.0, actor_id=abc)",
          "(Trainer pid=1) AttributeError: 'Engine' object has no attribute 'executor'"],
         C.PYTHON_EXCEPTION_OTHER, 1),
        # ... while the distributed runtime named as the failing part still is one.
        (["RuntimeError: init_process_group failed: Connection refused"], C.NCCL_ERROR, 0),
        # A dead engine's error quoting the original one loses to the line that states it first-hand.
        (["ERROR 01-01 10:00:00 [serving_chat.py:1] vllm.v1.engine.exceptions.EngineDeadError: Engine loop is not "
          "running. Inspect the stacktrace to find the original error: OutOfMemoryError('CUDA out of memory.').",
          "ERROR 01-01 10:00:00 [engine.py:1] OutOfMemoryError('CUDA out of memory. Tried to allocate 2 GiB.')"],
         C.CUDA_OOM, 1),
        # A logger's one-line summary of an exception loses to an equally specific exception stated by a traceback.
        (["ERROR 01-01 10:00:00 engine.py:56] UnboundLocalError: cannot access local variable 'p'",
          *TB, "AttributeError: 'PosixPath' object has no attribute 'startswith'"], C.PYTHON_EXCEPTION_OTHER, -1),
        # An MLIR error raised while a kernel DSL builds its IR is a failed JIT build.
        (["  mO = seqlen.offset_batch_Q(...)[None, None, head_idx]",
          "cutlass._mlir._mlir_libs._site_initialize.<locals>.MLIRError: Operation creation failed:",
          "error: unknown: expects `coord` and shape of view are weakly congruent,"], C.KERNEL_JIT_ERROR, 1),
        # A quantization refused for this GPU is the architecture's; refused for the model, the configuration's.
        ([*TB, "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. "
          "Current capability: 86."], C.KERNEL_NOT_SUPPORTED_ON_ARCH, -1),
        ([*TB, "ValueError: Quantization scheme fp8 is not supported for this model."], C.UNSUPPORTED_CONFIG, -1),
        # A model's architecture (a GGUF model type) is no GPU architecture.
        ([*TB, "ValueError: GGUF model with architecture qwen3moe is not supported yet."], C.UNSUPPORTED_CONFIG, -1),
        ([*TB, "ValueError: GGUF architecture 'qwen35' is not supported (known: ['gemma4'])"],
         C.UNSUPPORTED_CONFIG, -1),
        # Causes listed as possibilities are guesses: Ray's dead-worker notice names no kill.
        (["(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker exit "
          "type: SYSTEM_ERROR There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer "
          "due to high memory usage. (2) ray stop --force is called."], C.UNKNOWN, 0),
        # ... while a CUDA fault is one at any level, here a WARNING that came after the dead worker's notice.
        (["(raylet) A worker died or was killed while executing a task by an unexpected system error. There are some "
          "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.",
          "(WorkerDict pid=9) WARNING 02-21 04:32:47 model_runner_base.py:143] Failed to pickle inputs of failed "
          "execution: CUDA error: an illegal memory access was encountered"], C.ILLEGAL_MEMORY_ACCESS, 1),
        # transformers cannot find the tokenizer class the checkpoint names.
        ([*TB, "ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported."],
         C.TOKENIZER_OR_TEMPLATE_ERROR, -1),
    ],
)
def test_fetch_ray_headers_and_quoted_failures(lines: list[str], category: Category, root: int) -> None:
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (category, lines[root])
