"""GPU memory arithmetic of one launch: weights, KV cache, graphs, and whether they fit.

Plausible numbers for the log lines (`Load weight end. ... mem usage=`, `KV Cache is allocated. #tokens:`)
and the two failures that follow from flags alone: weights larger than a GPU (CUDA OOM while loading) and
no room left for the KV cache (`Not enough memory. Please try to increase --mem-fraction-static.`).
"""

from __future__ import annotations

from dataclasses import dataclass

CONTEXT_GIB = 0.55
"""CUDA context, NCCL buffers and torch's own allocations before the weights."""

KV_TORCH_DTYPES = {
    "auto": "torch.bfloat16",
    "bf16": "torch.bfloat16",
    "bfloat16": "torch.bfloat16",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2",
    "mxfp8": "torch.float8_e4m3fn",
    "fp4_e2m1": "torch.float4_e2m1fn_x2",
    "nvfp4": "torch.float4_e2m1fn_x2",
    "fp4_mx_block16": "torch.float4_e2m1fn_x2",
}
_BYTES_PER_ELEMENT = {"torch.bfloat16": 2.0, "torch.float8_e4m3fn": 1.0, "torch.float8_e5m2": 1.0}


@dataclass(frozen=True)
class MemoryPlan:
    """Per-rank memory of a launch, in GiB, and the KV cache it yields."""

    total_gib: float
    weights_gib: float
    kv_gib: float
    graph_gib: float
    tokens: int
    mem_fraction: float
    kv_dtype: str
    """The torch dtype the KV cache is allocated with (`torch.float8_e4m3fn`)."""

    @property
    def weights_fit(self) -> bool:
        """Whether the weights fit on one GPU at all."""
        return CONTEXT_GIB + self.weights_gib <= self.total_gib * 0.98

    @property
    def kv_fits(self) -> bool:
        """Whether --mem-fraction-static leaves room for a usable KV cache."""
        return self.kv_gib >= 0.25 and self.tokens >= 1024


def default_mem_fraction(total_gib: float) -> float:
    """SGLang's automatic --mem-fraction-static: reserve about 10 GiB on big GPUs, less on small ones."""
    reserved = 10.0 if total_gib > 60 else max(2.0, total_gib * 0.15)
    return round(min(0.9, max(0.5, (total_gib - reserved) / total_gib)), 3)


def plan_memory(
    *,
    total_mib: int,
    weights_total_gib: float,
    tp_size: int,
    kv_cache_dtype: str,
    kv_bytes_per_token: int,
    mem_fraction: float | None,
) -> MemoryPlan:
    """Split the model over `tp_size` GPUs of `total_mib` each and size the KV cache that remains."""
    total = total_mib / 1024
    fraction = mem_fraction if mem_fraction is not None else default_mem_fraction(total)
    weights = weights_total_gib / max(1, tp_size)
    dtype = KV_TORCH_DTYPES.get(kv_cache_dtype, "torch.bfloat16")
    kv = max(0.0, fraction * total - CONTEXT_GIB - weights)
    per_token = kv_bytes_per_token / 2 * _BYTES_PER_ELEMENT.get(dtype, 0.5)
    tokens = int(kv * 2**30 / per_token) if per_token else 0
    graph = round(min(1.5, 0.015 * total), 2)
    return MemoryPlan(round(total, 2), round(weights, 2), round(kv, 2), graph, tokens, fraction, dtype)
