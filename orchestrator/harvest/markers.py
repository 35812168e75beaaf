"""What a single log line says about a launch: which startup phase it marks, whether the server is going down.

Used live (the readiness wait follows the phase markers and stops at the first fatal line) and by the
evidence builder. Markers come from reference/sglang-facts.md section 3.2 (SGLang) plus the equivalent vLLM
lines, because the fixtures and users' logs mix both. A marker's phase is the phase the launch is in once
the line is printed: `Load weight end` means weights are loaded and memory allocation starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.classify import signatures
from orchestrator.harvest import autos
from orchestrator.harvest.lines import parse, strip_ansi
from orchestrator.model import Phase


@dataclass(frozen=True)
class MarkerSpec:
    """A startup marker: a literal the line contains, and the phase the launch is in from then on."""

    name: str
    needle: str
    phase: Phase


MARKERS: tuple[MarkerSpec, ...] = (
    MarkerSpec("server_args", "server_args=ServerArgs(", Phase.IMPORT),
    MarkerSpec("engine_init", "LLM engine (v", Phase.IMPORT),
    MarkerSpec("dist_init_begin", "Init torch distributed begin", Phase.MODEL_LOAD),
    MarkerSpec("dist_init_end", "Init torch distributed ends", Phase.MODEL_LOAD),
    MarkerSpec("load_weight_begin", "Load weight begin", Phase.MODEL_LOAD),
    MarkerSpec("load_model_begin", "Starting to load model", Phase.MODEL_LOAD),
    MarkerSpec("load_weight_end", "Load weight end", Phase.MEMORY_ALLOC),
    MarkerSpec("load_model_end", "Loading model weights took", Phase.MEMORY_ALLOC),
    MarkerSpec("load_model_end", "Model loading took", Phase.MEMORY_ALLOC),
    MarkerSpec("kv_cache_dtype", "Using KV cache dtype", Phase.MEMORY_ALLOC),
    MarkerSpec("kv_cache_allocated", "KV Cache is allocated", Phase.MEMORY_ALLOC),
    MarkerSpec("memory_pool_end", "Memory pool end", Phase.MEMORY_ALLOC),
    MarkerSpec("kv_cache_blocks", "# GPU blocks:", Phase.MEMORY_ALLOC),
    MarkerSpec("kv_cache_blocks", "GPU KV cache size:", Phase.MEMORY_ALLOC),
    MarkerSpec("attention_backend_init", "Init attention backend", Phase.MEMORY_ALLOC),
    MarkerSpec("capture_begin", "Capture cuda graph begin", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_progress", "Capturing batches", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_progress", "Capturing num tokens", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing cudagraphs", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing CUDA graph", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing the model for CUDA graphs", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_end", "Capture cuda graph end", Phase.WARMUP),
    MarkerSpec("capture_end", "Graph capturing finished", Phase.WARMUP),
    MarkerSpec("token_budget", "max_total_num_tokens=", Phase.WARMUP),
    MarkerSpec("server_process", "Started server process", Phase.WARMUP),
    MarkerSpec("app_startup", "Application startup complete", Phase.WARMUP),
    MarkerSpec("uvicorn_running", "Uvicorn running on", Phase.WARMUP),
    MarkerSpec("ready", "The server is fired up", Phase.READY),
)
"""Startup markers in launch order. vLLM has no self-warm-up: its `Uvicorn running` means ready (see verdict)."""

READY_MARKER = "ready"
UVICORN_MARKER = "uvicorn_running"


def marker_of_line(line: str) -> MarkerSpec | None:
    """The startup marker a line carries, if any."""
    for spec in MARKERS:
        if spec.needle in line:
            return spec
    return None


def phase_of_line(line: str) -> Phase | None:
    """The startup phase a launch is in once this line is printed, or None for a line that marks nothing."""
    spec = marker_of_line(line)
    return spec.phase if spec else None


_FATAL_RE = re.compile(
    r"\w hit an exception|Received sigquit|SIGQUIT received|^Killed\b|\d Killed\s|\bKilled\s*$|Killed process"
    r"|Fatal Python error"
    r"|CUDA (?:error|Error|driver error)|cudaError\w+|Segmentation fault|Caught signal \d+|core dumped"
    r"|Initialization failed\. warmup error|watchdog timeout|Child process unexpectedly failed"
    r"|Subprocess \S+ \(pid=\d+\) crashed|EngineCore failed to start|Engine core initialization failed"
    r"|CUDA out of memory|OutOfMemoryError|NCCL error|device-side assert|illegal memory access"
    r"|Not enough memory\. Please try to increase|Address already in use|\[Errno 98\]"
    r"|terminate called after throwing|Aborted \(core dumped\)"
    r"|^[\w.\-/ ]{1,60}: error: (?:unrecognized arguments|argument |the following arguments are required"
    r"|ambiguous option|invalid choice)"
)
_FATAL_NEEDLES = (
    "exception", "sigquit", "SIGQUIT", "Killed", "Fatal", "CUDA", "cudaError", "Segmentation", "Caught signal",
    "core dumped", "Initialization failed", "watchdog", "Child process", "crashed", "EngineCore", "Engine core",
    "OutOfMemory", "NCCL", "device-side", "illegal memory", "Not enough memory", "already in use", "Errno 98",
    "terminate called", "Aborted", "error:",
)


def is_fatal_line(line: str) -> bool:
    """Whether the line means the server is going down (scheduler exception, sigquit, Killed, CUDA error, ...)."""
    if not any(n in line for n in _FATAL_NEEDLES):
        return False
    return _FATAL_RE.search(parse(strip_ansi(line)).body) is not None


GENERIC_NEEDLES: tuple[str, ...] = (
    "Traceback", 'File "', '", line ', "Error", "ERROR", "error", "Exception", "exception", "Fatal", "FATAL", "fatal",
    "CRITICAL", "Critical", "Failed", "FAILED", "fail", "Killed", "SIG", "signal", "Assertion", "Aborted",
    "Segmentation fault", "timeout", "timed out", "Timed out", "WARN", "Warning", "warn", "Deprecat", "DEPRECAT",
    "deprecat", "might cause", "fall", "Falling back", "Ignor", "Setting ", "Please ", "DeepGemm", "DeepGEMM",
    "version", "vLLM", "Avg prompt throughput", "NaN",
)
"""Literals of lines worth a look besides markers and signatures: errors, warnings, tracebacks, engine hints."""

NEEDLES: tuple[str, ...] = tuple(
    dict.fromkeys(
        (*GENERIC_NEEDLES, *(m.needle for m in MARKERS), *signatures.NEEDLES, *autos.NEEDLES, *_FATAL_NEEDLES)
    )
)
"""Every literal the harvest cares about: a line with none of them is skipped without being parsed."""

_ERE_SPECIAL = re.compile(r"([.\\[\](){}*+?|^$])")
HOST_GREP_REGEX: str = "|".join(_ERE_SPECIAL.sub(r"\\\1", n) for n in sorted(NEEDLES))
"""One POSIX extended regex (`grep -E -n -b`) matching every line worth harvesting from a huge log."""
