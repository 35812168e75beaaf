"""The signature table: every row works on its own example; each failure family on typical real messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.classify.verdict import classify, root_cause
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge import (
    rows_config,
    rows_device,
    rows_distributed,
    rows_kernels,
    rows_loading,
    rows_memory,
    rows_runtime,
)
from orchestrator.knowledge.signatures import BY_ID, SIGNATURES
from orchestrator.model import Category, Phase, Status

C = Category
SOURCE_MESSAGES = Path(__file__).resolve().parents[1] / "data" / "source-messages"


def _verdict(*lines: str) -> tuple[Category, str | None]:
    verdict = classify(extract_evidence(list(lines)))
    return verdict.category, verdict.root_cause_line


def test_rows_are_unique_and_carry_a_needle_of_their_example() -> None:
    assert len({s.id for s in SIGNATURES}) == len(SIGNATURES)
    assert all(BY_ID[s.id] is s for s in SIGNATURES)
    for sig in SIGNATURES:
        assert sig.example, sig.id
        assert sig.matches(sig.example), sig.id


_MODULES = {
    rows_config: {C.INVALID_ARGUMENT, C.UNSUPPORTED_CONFIG},
    rows_memory: {C.CUDA_OOM, C.KV_CACHE_TOO_SMALL, C.GPU_MEMORY_IN_USE},
    rows_device: {C.NAN_IN_PROBS, C.CUDA_DEVICE_ASSERT, C.ILLEGAL_MEMORY_ACCESS, C.CUDA_GRAPH_CAPTURE_FAILED},
    rows_kernels: {C.KERNEL_NOT_SUPPORTED_ON_ARCH, C.KERNEL_JIT_ERROR},
    rows_distributed: {C.NCCL_ERROR},
    rows_loading: {C.IMPORT_ERROR, C.WEIGHTS_LOAD_ERROR, C.TOKENIZER_OR_TEMPLATE_ERROR},
    rows_runtime: {C.HANG_OR_TIMEOUT, C.PROCESS_KILLED, C.PORT_IN_USE, C.WARMUP_REQUEST_FAILED,
                   C.PYTHON_EXCEPTION_OTHER, C.UNKNOWN},
}
"""Each module of rows holds the rows of the categories its name and docstring promise (signatures.py lists them)."""


def test_each_category_has_its_rows_in_one_module() -> None:
    rows = {name: getattr(module, name) for module in _MODULES for name in dir(module) if name.endswith("_ROWS")}
    assert len(rows) == len(_MODULES)
    placed: dict[Category, str] = {}
    for module, categories in _MODULES.items():
        (table,) = (getattr(module, n) for n in dir(module) if n.endswith("_ROWS"))
        assert {s.category for s in table} == categories, module.__name__
        for category in categories:
            assert placed.setdefault(category, module.__name__) == module.__name__, category
    assert sorted(s.id for t in rows.values() for s in t) == sorted(s.id for s in SIGNATURES)
    assert set(placed) == {c for c in Category if c not in (C.HEALTHY, C.WRONG_OUTPUT)}


def _messages() -> list[str]:
    texts = [s.example for s in SIGNATURES]
    for name in ("messages.jsonl", "held-out.jsonl"):
        path = SOURCE_MESSAGES / name
        texts += [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts


def test_the_order_of_the_rows_never_decides_a_category() -> None:
    # Of two rows of one specificity, the first in the table would win on a line both match: no message that the rows
    # were written for (their examples, the projects' own messages) may be matched by two such rows of two categories.
    ties = []
    for text in _messages():
        named: dict[int, set[Category]] = {}
        for row in SIGNATURES:
            if row.matches(text):
                named.setdefault(row.specificity, set()).add(row.category)
        ties += [(text, sorted(c.value for c in cats)) for cats in named.values() if len(cats) > 1]
    assert not ties, ties


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.context is None], ids=lambda s: s.id)
def test_each_row_classifies_its_example(sig: object) -> None:
    from orchestrator.knowledge.patterns import Signature

    assert isinstance(sig, Signature)
    cause = root_cause(extract_evidence([sig.example]))
    assert cause is not None
    assert cause.category is sig.category or cause.candidate.specificity >= sig.specificity, cause


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.context is not None], ids=lambda s: s.id)
def test_context_rows_need_their_traceback(sig: object) -> None:
    from orchestrator.knowledge.patterns import Signature

    assert isinstance(sig, Signature)
    bare = root_cause(extract_evidence([sig.example]))
    assert bare is None or bare.candidate.rule != sig.id
    frames = {
        "exception_in_arg_parsing": ['  File "/s/server_args.py", line 5592, in prepare_server_args', "    x = y"],
        "dsa_fp8_kv_assert": [
            '  File "/s/memory_pool.py", line 1288, in set_kv_buffer',
            "    assert not (self.use_dsa and self.dsa_kv_cache_store_fp8)",
        ],
        "assert_in_config_code": ['  File "/s/attention/triton_backend.py", line 80, in init', "    assert x"],
        # A code row: its example is the frame's source line, and the exception follows it.
        "supported_sizes_assert": [
            '  File "/s/ops/prefix_prefill.py", line 708, in context_attention_fwd', "    {example}", "AssertionError"
        ],
    }[sig.id]
    lines = [f.replace("{example}", sig.example) for f in frames]
    if not any("{example}" in f for f in frames):
        lines.append(sig.example)
    cause = root_cause(extract_evidence(["Traceback (most recent call last):", *lines]))
    assert cause is not None and cause.candidate.rule == sig.id


@pytest.mark.parametrize(
    ("line", "category"),
    [
        ("RuntimeError: CUDA error: out of memory", C.CUDA_OOM),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", C.CUDA_OOM),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
            C.KV_CACHE_TOO_SMALL,
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
            "needed, which is larger than the available KV cache memory (9.95 GiB).",
            C.KV_CACHE_TOO_SMALL,
        ),
        ("[2026-01-05 10:00:00 TP0] Prefill out of memory. Try to lower your batch size.", C.KV_CACHE_TOO_SMALL),
        ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", C.NCCL_ERROR),
        # torch/csrc/cuda/nccl.cpp's own check: `NCCL Error <code>: <ncclGetErrorString>`.
        ("RuntimeError: NCCL Error 2: unhandled system error", C.NCCL_ERROR),
        ("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, unhandled system error", C.NCCL_ERROR),
        (
            "torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to connect",
            C.NCCL_ERROR,
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            C.KERNEL_NOT_SUPPORTED_ON_ARCH,
        ),
        (
            "ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use another backend.",
            C.KERNEL_NOT_SUPPORTED_ON_ARCH,
        ),
        (
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
            C.KERNEL_NOT_SUPPORTED_ON_ARCH,
        ),
        ("RuntimeError: CUDA error: misaligned address", C.ILLEGAL_MEMORY_ACCESS),
        ("RuntimeError: CUDA error: device-side assert triggered", C.CUDA_DEVICE_ASSERT),
        ("ImportError: libnuma.so.1: cannot open shared object file: No such file or directory", C.IMPORT_ERROR),
        ("ModuleNotFoundError: No module named 'flashinfer'", C.IMPORT_ERROR),
        ("ImportError: /x/common_ops.abi3.so: undefined symbol: _ZN3c1010Warning", C.IMPORT_ERROR),
        (
            "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
            C.WEIGHTS_LOAD_ERROR,
        ),
        ("OSError: /models/x does not appear to have a file named config.json.", C.WEIGHTS_LOAD_ERROR),
        ("huggingface_hub.errors.GatedRepoError: 401 Client Error.", C.WEIGHTS_LOAD_ERROR),
        ("OSError: Can't load tokenizer for '/models/x'.", C.TOKENIZER_OR_TEMPLATE_ERROR),
        (
            "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set",
            C.TOKENIZER_OR_TEMPLATE_ERROR,
        ),
        ("OSError: [Errno 98] Address already in use", C.PORT_IN_USE),
        ("RuntimeError: Ninja is required to load C++ extensions", C.KERNEL_JIT_ERROR),
        (
            "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
            C.KERNEL_JIT_ERROR,
        ),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'ninja'", C.KERNEL_JIT_ERROR),
        ("triton.compiler.errors.CompilationError: at 10:4:", C.KERNEL_JIT_ERROR),
        (
            "[2026-01-05 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
            C.HANG_OR_TIMEOUT,
        ),
        ("TimeoutError: Server failed to start within the timeout period.", C.HANG_OR_TIMEOUT),
        ("/bin/sh: line 1:  4242 Killed                  python3 -m sglang.launch_server", C.PROCESS_KILLED),
        (
            "ERROR 01-11 13:09:40 multiproc_worker_utils.py:123] Worker VllmWorkerProcess pid 9 died, exit code: -9",
            C.PROCESS_KILLED,
        ),
        ("Fatal Python error: Segmentation fault", C.UNKNOWN),
        ("ValueError: Unrecognized configuration class <class 'X'> for this kind of AutoModel", C.UNSUPPORTED_CONFIG),
        ("NotImplementedError: fp8 is not implemented for this layer", C.UNSUPPORTED_CONFIG),
        (
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
            C.GPU_MEMORY_IN_USE,
        ),
        (
            "ValueError: Free memory on device (10.2/79.1 GiB) on startup is less than desired GPU memory utilization "
            "(0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            C.GPU_MEMORY_IN_USE,
        ),
        ("launch_server.py: error: the following arguments are required: --model-path", C.INVALID_ARGUMENT),
        ("AttributeError: 'NoneType' object has no attribute 'shape'", C.PYTHON_EXCEPTION_OTHER),
    ],
)
def test_family_messages(line: str, category: Category) -> None:
    assert _verdict(line) == (category, line)


@pytest.mark.parametrize(
    "line",
    [
        'INFO:     127.0.0.1:55504 - "GET / HTTP/1.1" 404 Not Found',
        "INFO 07-07 20:12:44 metrics.py:295] Avg prompt throughput: 0.0 tokens/s, GPU KV cache usage: 0.0%.",
        "[2025-11-30 11:18:06] Endpoint '/get_model_info' is deprecated and will be removed in a future version.",
        "2025-03-27 21:33:31,320 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend",
        "[2025-03-27 21:33:31] Ignore import error when loading sglang.srt.models.mllama4: No module named 'timm'",
        "WARNING: destroy_process_group() was not called before program exit, which can leak resources.",
        "WARNING 01-01 00:00:00 fp8.py:1] Your GPU does not have native support for FP8 computation but FP8 "
        "quantization is being used. Weight-only FP8 compression will be used leveraging the Marlin kernel.",
        "host:1:1 [0] misc/socket.cc:538 NCCL WARN socketStartConnect: Connect to 127.0.0.1<1> failed : Connection "
        "refused",
        "[2025-05-09 19:11:16] FlashAttention3 only supports fp8_e4m3 if using FP8; "
        "Setting attention backend to triton.",
        "[2025-05-09 19:11:16 TP3] Token indices sequence length is longer than the specified maximum sequence length "
        "for this model (140000 > 131072). Running this sequence through the model will result in indexing errors",
        "[2025-05-09 19:11:16] Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
        "[2025-05-09 19:11:16] INFO:     Shutting down",
    ],
)
def test_normal_noise_is_healthy(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.status, verdict.category) == (Status.PASS, Category.HEALTHY)


def test_most_specific_cause_wins_whatever_the_order() -> None:
    nan = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
    assert _verdict("AttributeError: x", "RuntimeError: CUDA error: device-side assert triggered", nan) == (
        C.NAN_IN_PROBS,
        nan,
    )
    assert _verdict("RuntimeError: CUDA error: device-side assert triggered", "AttributeError: x")[0] is (
        C.CUDA_DEVICE_ASSERT
    )


@pytest.mark.parametrize(
    "followup",
    [
        "[2025-05-09 19:11:17] Received sigquit from a child process. It usually means the child failed.",
        "(EngineCore_DP0 pid=1) ERROR 09-27 11:31:49 [core.py:718] EngineCore failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above.",
        "[rank0]:[W105 10:00:41.1 42 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() not called",
        "[2025-05-09 19:11:17] Child process unexpectedly failed with an exit code 1. pid=4242",
    ],
)
def test_generic_followups_never_beat_an_earlier_cause(followup: str) -> None:
    cause = "ValueError: weird value"
    assert _verdict(cause, followup) == (C.PYTHON_EXCEPTION_OTHER, cause)


def test_a_killed_line_does_not_beat_the_exception_that_caused_the_kill() -> None:
    assert _verdict("ValueError: weird value", "Killed")[0] is C.PYTHON_EXCEPTION_OTHER
    assert _verdict("[2026-01-05 10:00:02 TP0] Load weight begin.", "Killed")[0] is C.PROCESS_KILLED


def test_a_quoted_exception_loses_to_the_exception_line_itself() -> None:
    quoted = "# [Bug]: ValueError: The quantization method fp8 is not supported for the current GPU"
    real = "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 90."
    # A quantization refused for the current GPU's capability is the architecture's (reference/taxonomy.md).
    assert _verdict(quoted, real) == (C.KERNEL_NOT_SUPPORTED_ON_ARCH, real)


def test_an_error_the_server_survived_is_not_a_cause() -> None:
    log = [
        "[2025-05-09 19:11:16] ValueError: optional feature probe failed",
        "[2025-05-09 19:11:20] The server is fired up and ready to roll!",
    ]
    verdict = classify(extract_evidence(log))
    assert (verdict.category, verdict.phase) == (C.HEALTHY, Phase.READY)


def test_gpu_memory_in_use_rule_reads_the_amounts() -> None:
    other = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "95.59 GiB of which 0 bytes is free. Process 77 has 90.00 GiB memory in use. Including non-PyTorch "
        "memory, this process has 5.00 GiB memory in use."
    )
    ours = other.replace("Process 77 has 90.00 GiB", "Process 77 has 0.50 GiB").replace(
        "5.00 GiB memory", "94 GiB memory"
    )
    container = (
        "torch.OutOfMemoryError: CUDA out of memory. Process 258800 has 23.62 GiB memory in use. Of the "
        "allocated memory 22.83 GiB is allocated by PyTorch, and 162.87 MiB is reserved by PyTorch but "
        "unallocated."
    )
    assert _verdict(other)[0] is C.GPU_MEMORY_IN_USE
    assert _verdict(ours)[0] is C.CUDA_OOM
    assert _verdict(container)[0] is C.CUDA_OOM
    loading = "[2026-01-05 10:00:02 TP0] Load weight begin. avail mem=3.00 GB"
    bare = "torch.OutOfMemoryError: CUDA out of memory. Process 77 has 70.00 GiB memory in use."
    assert _verdict(loading, bare)[0] is C.GPU_MEMORY_IN_USE
    assert _verdict(bare)[0] is C.CUDA_OOM


def test_argparse_error_is_invalid_at_arg_parse() -> None:
    log = [
        "usage: sglang serve [-h] [--tp-size TP_SIZE]",
        "sglang serve: error: argument --tp-size: invalid int value: 'x'",
    ]
    verdict = classify(extract_evidence(log))
    assert (verdict.status, verdict.category, verdict.phase) == (Status.INVALID, C.INVALID_ARGUMENT, Phase.ARG_PARSE)
