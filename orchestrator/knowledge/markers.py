"""Startup markers: which phase of a launch a log line marks.

Used live (the readiness wait follows the phase markers and stops at the first fatal line) and by the
evidence builder. Markers come from reference/sglang-facts.md section 3.2 (SGLang) plus the equivalent vLLM
lines, because the fixtures and users' logs mix both. A marker's phase is the phase the launch is in once
the line is printed: `Load weight end` means weights are loaded and memory allocation starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    MarkerSpec("dist_init_end", "is assigned as DP rank", Phase.MODEL_LOAD),  # vLLM: `rank 0 in world size 1 is ...`
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
    MarkerSpec("kv_cache_blocks", "# CUDA blocks:", Phase.MEMORY_ALLOC),
    MarkerSpec("attention_backend_init", "Init attention backend", Phase.MEMORY_ALLOC),
    MarkerSpec("capture_begin", "Capture cuda graph begin", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_progress", "Capturing batches", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_progress", "Capturing num tokens", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing cudagraphs", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing CUDA graph", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_begin", "Capturing the model for CUDA graphs", Phase.CUDA_GRAPH_CAPTURE),
    MarkerSpec("capture_end", "Capture cuda graph end", Phase.WARMUP),
    MarkerSpec("capture_end", "Graph capturing finished", Phase.WARMUP),
    MarkerSpec("capture_end", "Capture draft cuda graph end", Phase.WARMUP),  # speculative decoding's draft model
    MarkerSpec("capture_end", "CUDA graph end", Phase.WARMUP),  # `Capture target decode CUDA graph end`
    MarkerSpec("token_budget", "max_total_num_tokens=", Phase.WARMUP),
    MarkerSpec("engine_ready", "init engine (profile", Phase.WARMUP),
    MarkerSpec("api_server_start", "Starting vLLM API server", Phase.WARMUP),
    MarkerSpec("api_server_start", "Starting vLLM server on", Phase.WARMUP),
    MarkerSpec("server_process", "Started server process", Phase.WARMUP),
    MarkerSpec("app_startup", "Application startup complete", Phase.WARMUP),
    MarkerSpec("uvicorn_running", "Uvicorn running on", Phase.WARMUP),
    MarkerSpec("ready", "The server is fired up", Phase.READY),
)
"""Startup markers in launch order. vLLM has no self-warm-up: its `Uvicorn running` means ready (see verdict)."""

READY_MARKER = "ready"
UVICORN_MARKER = "uvicorn_running"
APP_STARTUP_MARKER = "app_startup"
API_SERVER_MARKER = "api_server_start"
ENGINE_READY_MARKER = "engine_ready"


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


SERVING_ACTIVITY = re.compile(
    r"Decode batch[.,]|Prefill batch[.,]|\"(?:POST|GET) /(?:generate|v1/\S+) HTTP/[\d.]+\" 200\b"
    r"|Avg (?:prompt|generation) throughput: (?:[1-9]\d*|0\.\d*[1-9])"
)
"""Lines that show a server answering requests: batches run, completions returned with 200."""

REQUEST_HANDLER = re.compile(
    r"[\[ (]serving(?:_\w+)?\.py:\d+\]|[\[ (/]\w*(?:tool|reasoning)_parsers?\.py:\d+\]"
    r"|\bError (?:in extracting|trying to handle streaming) tool call\b|\bError in preprocessing prompt inputs\b"
    r"|\bError in (?:parse_\w+|detect_and_parse)\b|\bException in ASGI application\b"
    r"|(?i:\b(?:for|of) (?:the )?(?:unrecognized |unknown |aborted |finished |expired )?request(?: ?id)?[ =:]+['\"]?"
    r"(?:chatcmpl-|cmpl-|req[-_])?[0-9a-f][\w-]{7,})"
)
"""Where an OpenAI-compatible server logs one request's failure (vLLM's `[serving_chat.py:257]`, its tool-call and
reasoning parsers `[hermes_tool_parser.py:110] Error in extracting tool call from response`; SGLang's tool-call
and reasoning parsers, `Error in parse_streaming_increment: ...`; uvicorn's `Exception in ASGI application`, logged for
one request's unhandled exception, with its traceback after it), or any message about one request it names by id
(a KV connector's `Potentially invalid KV blocks for unrecognized request chatcmpl-...`): it answers that request (with
an error status, or without the parsed call) and goes on serving, so what is logged there is the request's, not the
server's."""
