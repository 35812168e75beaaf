"""The launch phases and failure kinds the simulator plays out, its own copy of SGLang's vocabulary.

The names are the public contract the tool reads back from the simulated host's logs and answers (the phase a
failure happens in, the kind of failure a scenario asks for); the simulator keeps them itself so that a change
to the tool's taxonomy cannot silently change what the simulated host does.
"""

from __future__ import annotations

from enum import Enum


class Phase(str, Enum):
    """Where a launch is, in the order a launch goes through them."""

    PREFLIGHT = "preflight"
    ARG_PARSE = "arg_parse"
    IMPORT = "import"
    MODEL_LOAD = "model_load"
    MEMORY_ALLOC = "memory_alloc"
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    WARMUP = "warmup"
    READY = "ready"
    GREEDY_DECODE = "greedy_decode"
    SAMPLED_DECODE = "sampled_decode"
    CONCURRENT_DECODE = "concurrent_decode"
    AFTER_DECODE = "after_decode"
    SHUTDOWN = "shutdown"
    SERVING = "serving"

    @property
    def order(self) -> int:
        """Position in the launch sequence (serving sorts with the decode phases)."""
        if self is Phase.SERVING:
            return _ORDER.index(Phase.GREEDY_DECODE)
        return _ORDER.index(self)


_ORDER: list[Phase] = [p for p in Phase if p is not Phase.SERVING]

FAILURE_KINDS = frozenset(
    {
        "invalid_argument", "unsupported_config", "import_error", "cuda_oom", "kv_cache_too_small",
        "cuda_device_assert", "nan_in_probs", "illegal_memory_access", "nccl_error", "cuda_graph_capture_failed",
        "kernel_not_supported_on_arch", "weights_load_error", "hang_or_timeout", "tokenizer_or_template_error",
        "port_in_use", "process_killed", "kernel_jit_error", "gpu_memory_in_use", "warmup_request_failed",
        "wrong_output", "python_exception_other", "unknown", "healthy",
    }
)  # fmt: skip
"""The failures a scenario can ask for by name: the category names of the taxonomy SGLang failures fall in."""
