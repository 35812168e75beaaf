"""Signature rows about device memory: out of memory in any accelerator's or library's words (cuda_oom), a KV or state
cache the memory left does not hold (kv_cache_too_small), memory other processes hold (gpu_memory_in_use). Part of
the signature table (see signatures.py for the specificity bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import (
    CACHE_SHORTAGE,
    CUDA_CODE_END,
    CUDA_RESULT,
    CUDA_RESULT_NEEDLES,
    states_without_fallback,
)
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

MEMORY_ROWS: tuple[Signature, ...] = (
    # cuda_oom: the device ran out of memory, in any accelerator's and any library's words.
    # Out of memory, on any accelerator PyTorch drives (CUDA, ROCm's HIP, Ascend's NPU, Intel's XPU, Apple's MPS, ...):
    # the same statement of the device's memory running out, whoever logs it and at whatever level. vLLM's re-raise
    # of it with advice (`CUDA out of memory occurred when warming up sampler ...`) is left to the plain row below, so
    # the original error, where the log has it, is the root line.
    sig("cuda_oom", C.CUDA_OOM, 80,
        r"(?:CUDA|HIP|NPU|XPU|MPS|MLU|GCU|MUSA) out of memory(?! occurred when)|OutOfMemoryError"
        r"|(?:CUDA|HIP) error: out of memory|cudaErrorMemoryAllocation|hipErrorOutOfMemory"
        r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
        # The device's name before `out of memory` is what a line can be found by: a C++ exception's `what():  NPU out
        # of memory. Tried to allocate ...` carries no other literal.
        ("out of memory", "A out of memory", "P out of memory", "U out of memory", "S out of memory",
         "OutOfMemoryError", "cudaErrorMemoryAllocation", "hipErrorOutOfMemory", "_ALLOC_FAILED"),
        any_level=True,
        example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 380.00 MiB."),
    # NCCL's report of the CUDA call that failed (`Last error: Cuda failure 'out of memory'`): the cause of its error.
    sig("nccl_cuda_oom", C.CUDA_OOM, 82, r"(?i:cuda failure \d*\s*'?out of memory)", ("uda failure", "UDA failure"),
        any_level=True, example="Cuda failure 'out of memory'"),
    sig("out_of_memory", C.CUDA_OOM, 55, r"(?i)\bout of memory\b", ("out of memory", "Out of memory", "OUT OF MEMORY"),
        example="RuntimeError: out of memory"),
    # NCCL's allocation of device memory failing (`Failed to CUDA malloc 1073741824 bytes`): the GPU is out of memory,
    # in NCCL's `WARN` line or as the `Last error:` that PyTorch's NCCL error quotes on its own line.
    sig("nccl_device_alloc_failed", C.CUDA_OOM, 81,
        r"NCCL WARN .{0,80}Failed to CUDA (?:malloc|calloc)|^Failed to CUDA (?:malloc|calloc) \d+ bytes",
        ("NCCL WARN", "Failed to CUDA"), any_level=True,
        example="node1:1234:5678 [0] include/alloc.h:120 NCCL WARN Failed to CUDA malloc 1073741824 bytes"),
    sig("cuda_result_out_of_memory", C.CUDA_OOM, 78, rf"{CUDA_RESULT}2{CUDA_CODE_END}|\bCUDA_ERROR_OUT_OF_MEMORY\b",
        (*CUDA_RESULT_NEEDLES, "CUDA_ERROR_OUT_OF_MEMORY"), any_level=True,
        example="[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp "
        "func=cu_mem_create line=103"),
    # XLA's (TPU, JAX) status for a device allocation that did not fit: `RESOURCE_EXHAUSTED: ... Attempting to reserve
    # 6.14G at the bottom of memory`, `RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in HBM`.
    sig("xla_resource_exhausted", C.CUDA_OOM, 72,
        r"\bRESOURCE_EXHAUSTED\b.{0,240}?(?i:\bmemory\b|\breserve\b|\ballocat\w*|\bHBM\b|\bvmem\b"
        r"|\d(?:\.\d+)? ?[GMK]i?B?\b)",
        "RESOURCE_EXHAUSTED", any_level=True,
        example="RESOURCE_EXHAUSTED: Error loading program 'jit_f': Attempting to reserve 6.14G at the bottom of "
        "memory. That was not possible."),
    # A GPU allocation that failed, in words other than CUDA's own `out of memory` (`Failed to allocate 2.0 GiB on
    # device 0`, `not enough GPU memory`, `cudaMalloc failed`). Host memory (`Cannot allocate memory`, errno 12) is not
    # this: the words must name the device.
    sig("device_allocation_failed", C.CUDA_OOM, 62,
        r"(?i:\b(?:failed to|unable to|cannot|can't|could not|couldn't) allocate\b.{0,80}"
        r"\b(?:GPU|device|cuda|VRAM|HBM)\b|\b(?:GPU|device|cuda|VRAM|HBM)\b.{0,40}\ballocation (?:of .{0,40})?failed\b"
        r"|\b(?:insufficient|not enough) (?:free )?(?:GPU|device|CUDA|VRAM|HBM) memory\b"
        r"|\bcudaMalloc\w*\b.{0,40}\bfail)",
        ("llocat", "LLOCAT", "nsufficient", "ot enough", "cudaMalloc"), any_level=True,
        example="RuntimeError: Failed to allocate 2.00 GiB on device cuda:0"),
    # kv_cache_too_small: the memory left for the KV cache (or a hybrid model's state cache) is too small.
    sig("kv_not_enough_memory", C.KV_CACHE_TOO_SMALL, 85, r"Not enough memory\. Please try to increase",
        "Not enough memory", phase=P.MEMORY_ALLOC,
        example="RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    # The memory left for the KV cache came out negative: vLLM's profiler logs it at INFO and the engine then fails
    # (`Available KV cache memory: -2.14 GiB`), a statement of the cause whatever its level.
    sig("kv_budget_negative", C.KV_CACHE_TOO_SMALL, 85,
        r"(?i:\b(?:available )?KV cache memory|memory (?:available )?for (?:the )?KV cache)\W{0,4}(?:is )?-\d",
        ("KV cache", "kv cache"), phase=P.MEMORY_ALLOC, any_level=True,
        example="INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: -2.14 GiB"),
    sig("kv_smaller_than_context", C.KV_CACHE_TOO_SMALL, 85,
        r"larger than the maximum number of tokens that can be stored in KV cache"
        r"|No available memory for the cache blocks|KV cache is needed, which is larger than the available KV cache"
        r"|To serve at least one request with the models?'?s? max seq len|(?i:profiled (?:value|number of tokens|"
        r"memory)\W{0,4}(?:is )?-\d)",
        ("stored in KV cache", "No available memory for the cache blocks", "KV cache is needed", "To serve at least",
         "profiled"),
        phase=P.MEMORY_ALLOC,
        example="The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in "
        "KV cache (23648)."),
    sig("kv_runtime_exhausted", C.KV_CACHE_TOO_SMALL, 85, r"(?i)out of memory\. Try to lower your batch size",
        "Try to lower your batch size", phase=P.SERVING,
        example="Decode out of memory. Try to lower your batch size."),
    # A cache the memory left over does not hold: the KV cache, a hybrid model's mamba/state cache, a sliding-window
    # pool (vocabulary.CACHE_SHORTAGE), whichever server says so and in whichever order.
    sig("cache_shortage", C.KV_CACHE_TOO_SMALL, 70, CACHE_SHORTAGE.pattern,
        ("cache", "Cache", "CACHE", "pool", "ncrease", "aise", "max_total_num_tokens"), phase=P.MEMORY_ALLOC,
        vocabulary=states_without_fallback,
        example="AssertionError: Not enough space for mamba cache, try to increase --mamba-full-memory-ratio."),
    # gpu_memory_in_use: another process holds the GPU memory at start (see verdict.py for the OOM-text rule).
    sig("memory_unbalanced", C.GPU_MEMORY_IN_USE, 90,
        r"memory capacity is unbalanced|GPUs? may be occupied by other processes|GPU memory used by other processes"
        r"|Free memory on device .{0,60} is less than desired GPU memory utilization"
        r"|(?:other|another) process(?:es)? (?:sharing|using|holding|occupying) (?:the same )?"
        r"(?:container|GPUs?|device)",
        ("unbalanced", "occupied by other processes", "used by other processes", "Free memory on device",
         "other process", "another process"),
        example="RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes."),
)
