"""Every failure text the simulator writes, in the form SGLang, PyTorch, CUDA, NCCL and uvicorn print it.

Sources: reference/sglang-facts.md section 4 and the real logs in ../shared/fixtures/crash-logs/. A kind's
text is the lines printed before the logged traceback (kernel asserts, NCCL warnings) plus the traceback,
whose frames come from the phase it fails in and the kind's own innermost frames (tracebacks.py holds the
frames). Kinds without text: `hang` (goes quiet), `process_killed` (SIGKILL, the log ends in `Killed`),
`unknown` (exits without a word), `garbage` and `drift` (answer wrongly). `invalid_argument` is an argparse error.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.sim import tracebacks as tb
from orchestrator.sim.releases import SITE, graph_solutions

SILENT_KINDS = frozenset({"hang", "process_killed", "unknown", "garbage", "drift"})

CUDA_BOILERPLATE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "",
)
CHAINED = ("", "During handling of the above exception, another exception occurred:", "")
NAN_TEXT = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
OOM_ADVICE = (
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
    "avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
SCHEDULER_EXCEPTION = "Scheduler hit an exception: "
SIGQUIT_RECEIVED = "Received sigquit from a child process. It usually means the child failed."
KILLED = "Killed"
CHILD_FAILED = "Child process unexpectedly failed with an exit code {code}. pid={pid}"
KILL_TREE = "kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}"
WARMUP_FAILED = "Initialization failed. warmup error: "
BIND_FAILED = "ERROR:    [Errno {errno}] error while attempting to bind on address ('{host}', {port}): {reason}"
HEALTH_CHECK_FAILED = (
    "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. "
    "tic start time: {tic}. last_heartbeat time: {tic}"
)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b")


@dataclass(frozen=True)
class Context:
    """What the failure texts need to know about the launch and the failing rank."""

    dsa_era: bool = False
    torch_version: str = "2.9.1"
    gpu: int = 0
    total_gib: float = 95.59
    used_gib: float = 1.0
    mem_fraction: float = 0.85
    model_path: str = "/models/model"
    port: int = 30000
    pid: int = 0
    other_pid: int | None = None
    other_gib: float = 0.0
    message: str | None = None
    """Replaces the kind's exception line (the root cause) when set."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (ranks get it over their control socket)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Context:
        """Rebuild from `to_dict` output."""
        return cls(**data)

    @property
    def accelerator_error(self) -> str:
        """The exception class torch raises for CUDA errors: AcceleratorError from torch 2.8 on."""
        parts = [int(p) for p in re.findall(r"\d+", self.torch_version)[:2]] or [2, 9]
        return "torch.AcceleratorError" if tuple(parts) >= (2, 8) else "RuntimeError"


@dataclass(frozen=True)
class FailureText:
    """Raw lines printed before the logged traceback, and the traceback itself."""

    before: tuple[str, ...]
    traceback: tuple[str, ...]


def exception_line(default: str, ctx: Context) -> str:
    """The root-cause line: the scenario's message (given its class if it names none) or the kind's own."""
    if not ctx.message:
        return default
    if _EXCEPTION_LINE.match(ctx.message):
        return ctx.message
    return f"{default.split(':', 1)[0]}: {ctx.message}"


def scheduler_failure(kind: str, phase: str, ctx: Context) -> FailureText:
    """What a scheduler rank prints when `kind` strikes during `phase`."""
    before, inner, tail = _KINDS.get(kind, _KINDS["python_exception_other"])(ctx)
    frames = tb.phase_frames(phase)
    if phase not in ("import", "model_load", "memory_alloc", "cuda_graph_capture"):
        frames += tb.SAMPLE if kind == "nan_in_probs" else tb.FORWARD
    return FailureText(tuple(before), tuple(tb.render(frames + tuple(inner)) + tail))


def main_process_failure(kind: str, ctx: Context) -> list[str]:
    """The plain traceback of a failure raised while the main process checks its arguments."""
    _, _, tail = _KINDS.get(kind, _KINDS["python_exception_other"])(ctx)
    return tb.render(tb.ARG_PARSE) + tail


def warmup_failure(ctx: Context) -> list[str]:
    """The traceback after `Initialization failed. warmup error: ` (issue #2468: a proxy answered)."""
    frames: tuple[tb.Frame, ...] = (
        (
            "S/srt/entrypoints/http_server.py",
            1651,
            "_execute_server_warmup",
            'assert res.status_code == 200, f"{res=}, {res.text=}"',
        ),
    )
    return [*tb.render(frames), exception_line("AssertionError: res=<Response [502]>, res.text=''", ctx)]


Parts = tuple[list[str], tuple[tb.Frame, ...], list[str]]


def _cuda(ctx: Context, error: str, *, root_cause: bool = True) -> list[str]:
    line = f"{ctx.accelerator_error}: CUDA error: {error}"
    return [exception_line(line, ctx) if root_cause else line, *CUDA_BOILERPLATE]


def _asserts(template: str, count: int = 4) -> list[str]:
    return [template.format(thread=i) for i in range(count)]


def _nan_in_probs(ctx: Context) -> Parts:
    before = _asserts(
        "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: block: [0,31,0], "
        "thread: [{thread},0,0] Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed."
    )
    second = tb.render(tb.PROCESS_RESULT)
    assert_error = _cuda(ctx, "device-side assert triggered", root_cause=False)
    tail = [exception_line(NAN_TEXT, ctx), *CHAINED, *second, *assert_error]
    return before, (), tail


def _device_assert(ctx: Context) -> Parts:
    before = _asserts(
        "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:111: operator(): block: [0,0,0], thread: [{thread},0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'
    )
    return before, (), _cuda(ctx, "device-side assert triggered")


def _illegal_memory_access(ctx: Context) -> Parts:
    backend = "dsa_backend" if ctx.dsa_era else "nsa_backend"
    frames = (
        (f"S/srt/layers/attention/{backend}.py", 1187, "forward_decode", "o = flash_mla_sparse_fwd("),
        ("P/sgl_kernel/flash_mla.py", 161, "flash_mla_sparse_fwd", "return torch.ops.sgl_kernel.sparse_prefill_fwd("),
    )
    return [], frames, _cuda(ctx, "an illegal memory access was encountered")


def _oom(ctx: Context) -> Parts:
    free_mib = max(0.0, (ctx.total_gib - ctx.used_gib - ctx.other_gib) * 1024)
    tried_gib = max(2.0, free_mib / 1024 + 1.0)  # what failed is always a little more than what was left
    holders = f"Process {ctx.other_pid} has {ctx.other_gib:.2f} GiB memory in use. " if ctx.other_pid else ""
    text = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU {ctx.gpu} has a total "
        f"capacity of {ctx.total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. {holders}Including non-PyTorch "
        f"memory, this process has {ctx.used_gib:.2f} GiB memory in use. Of the allocated memory "
        f"{max(0.0, ctx.used_gib - 0.5):.2f} GiB is allocated by PyTorch, and 162.87 MiB is reserved by PyTorch but "
        f"unallocated. {OOM_ADVICE}"
    )
    frames = (("T/cuda/memory.py", 1024, "empty", "return torch._C._VariableFunctions.empty(size, **kwargs)"),)
    return [], frames, [exception_line(text, ctx)]


def _kv_cache_too_small(ctx: Context) -> Parts:
    text = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    if ctx.dsa_era:
        text += f" Current value: mem_fraction_static={ctx.mem_fraction}"
    frames = (("S/srt/model_executor/model_runner.py", 1702, "init_memory_pool", "raise RuntimeError("),)
    return [], frames, [exception_line(text, ctx)]


def _unsupported_config(ctx: Context) -> Parts:
    frames = (("S/srt/model_executor/model_runner.py", 1650, "check_kv_cache_compatibility", "raise ValueError("),)
    return [], frames, [exception_line("ValueError: This configuration is not supported on this platform.", ctx)]


def _not_on_arch(ctx: Context) -> Parts:
    frames = (("P/sgl_kernel/attention.py", 88, "merge_state_v2", "torch.ops.sgl_kernel.merge_state_v2.default("),)
    return [], frames, _cuda(ctx, "no kernel image is available for execution on the device")


def _graph_capture(ctx: Context) -> Parts:
    inner = ctx.message or "CUDA error: operation not permitted when stream is capturing"
    inner = inner.split(": ", 1)[1] if _EXCEPTION_LINE.match(inner) else inner
    first = [f"{ctx.accelerator_error}: {inner}", *CUDA_BOILERPLATE]
    outer = [f"Exception: Capture cuda graph failed: {inner}", *graph_solutions(ctx.dsa_era)]
    frames = (("P/sgl_kernel/moe.py", 58, "moe_fused_gate", "return torch.ops.sgl_kernel.moe_fused_gate.default("),)
    return [], frames, [*first, *CHAINED[1:], *tb.render(tb.GRAPH_RAISE), *outer]


def _nccl(ctx: Context) -> Parts:
    before = [
        f"sim-host:{ctx.pid}:{ctx.pid} [{ctx.gpu}] misc/socket.cc:538 NCCL WARN socketStartConnect: Connect to "
        f"127.0.0.1<{ctx.port + 417}> failed : Connection refused"
    ]
    frames = (
        ("S/srt/distributed/device_communicators/pynccl.py", 164, "all_reduce", "self.nccl.ncclAllReduce("),
        ("S/srt/distributed/device_communicators/pynccl_wrapper.py", 402, "ncclAllReduce", "self.NCCL_CHECK("),
        (
            "S/srt/distributed/device_communicators/pynccl_wrapper.py",
            357,
            "NCCL_CHECK",
            'raise RuntimeError(f"NCCL error: {error_str}")',
        ),
    )
    text = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    return before, frames, [exception_line(text, ctx)]


def _weights(ctx: Context) -> Parts:
    frames = (("S/srt/models/deepseek_v2.py", 3377, "load_weights", "param = params_dict[name]"),)
    return [], frames, [exception_line("KeyError: 'model.layers.3.mlp.experts.w13_weight_scale_2'", ctx)]


def _import(ctx: Context) -> Parts:
    frames = (
        (
            "S/srt/layers/quantization/fp8_kernel.py",
            46,
            "<module>",
            "from sgl_kernel import sgl_per_token_group_quant_fp8",
        ),
        ("P/sgl_kernel/__init__.py", 5, "<module>", "common_ops = _load_architecture_specific_ops()"),
        ("P/sgl_kernel/load_utils.py", 188, "_load_architecture_specific_ops", "raise ImportError(error_msg)"),
    )
    text = (
        f"ImportError: {SITE}/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: "
        "_ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv"
    )
    return [], frames, [exception_line(text, ctx)]


def _tokenizer(ctx: Context) -> Parts:
    path = ctx.model_path
    frames = (
        ("S/srt/utils/hf_transformers_utils.py", 484, "get_tokenizer", "tokenizer = AutoTokenizer.from_pretrained("),
        (
            "P/transformers/models/auto/tokenization_auto.py",
            1153,
            "from_pretrained",
            "return tokenizer_class_fast.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)",
        ),
    )
    text = (
        f"OSError: Can't load tokenizer for '{path}'. If you were trying to load it from "
        "'https://huggingface.co/models', make sure you don't have a local directory with the same name. Otherwise, "
        f"make sure '{path}' is the correct path to a directory containing all relevant files for a "
        "PreTrainedTokenizerFast tokenizer."
    )
    return [], frames, [exception_line(text, ctx)]


def _jit(ctx: Context) -> Parts:
    op = "batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_e4m3_dtype_o_bf16_dtype_idx_i32_head_dim_qk_576"
    before = [f"2026-01-01 00:00:00,000 - INFO - flashinfer.jit: Loading JIT ops: {op}"]
    frames = (
        ("P/flashinfer/jit/core.py", 279, "build_and_load", "self.build(verbose, need_lock=False)"),
        ("P/flashinfer/jit/cpp_ext.py", 273, "run_ninja", "raise RuntimeError(msg) from e"),
    )
    text = exception_line("RuntimeError: Ninja build failed. Ninja output:", ctx)
    tail = [
        text,
        f"FAILED: {op}/batch_decode.cuda.o",
        "nvcc fatal   : Unsupported gpu architecture 'compute_120a'",
        "ninja: build stopped: subcommand failed.",
    ]
    return before, frames, tail


def _port(ctx: Context) -> Parts:
    frames = (
        ("S/srt/utils/common.py", 1412, "get_zmq_socket", "socket.bind(endpoint)"),
        ("P/zmq/sugar/socket.py", 311, "bind", "super().bind(addr)"),
        ("_zmq.py", 917, "zmq.backend.cython._zmq.Socket.bind", ""),
    )
    text = f"zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:{ctx.port + 233}')"
    return [], frames, [exception_line(text, ctx)]


def _other(ctx: Context) -> Parts:
    frames = (("S/srt/layers/logits_processor.py", 341, "forward", "if hidden_states.shape[0] == 0:"),)
    return [], frames, [exception_line("AttributeError: 'NoneType' object has no attribute 'shape'", ctx)]


_KINDS = {
    "nan_in_probs": _nan_in_probs,
    "cuda_device_assert": _device_assert,
    "illegal_memory_access": _illegal_memory_access,
    "cuda_oom": _oom,
    "gpu_memory_in_use": _oom,
    "kv_cache_too_small": _kv_cache_too_small,
    "unsupported_config": _unsupported_config,
    "kernel_not_supported_on_arch": _not_on_arch,
    "cuda_graph_capture_failed": _graph_capture,
    "nccl_error": _nccl,
    "weights_load_error": _weights,
    "import_error": _import,
    "tokenizer_or_template_error": _tokenizer,
    "kernel_jit_error": _jit,
    "port_in_use": _port,
    "python_exception_other": _other,
}
