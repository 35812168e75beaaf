"""Signature rows about faults on the device while kernels run: NaN or inf reaching the sampler (nan_in_probs),
device-side assertions (cuda_device_assert), illegal memory accesses, CUDA graph capture failing. Part of the
signature table (see signatures.py for the specificity bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import CUDA_CODE_END, CUDA_RESULT, CUDA_RESULT_NEEDLES
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

DEVICE_ROWS: tuple[Signature, ...] = (
    # nan_in_probs: NaN or inf reaching the sampler: torch.multinomial's checks, SGLang's NaN detector.
    sig("nan_probability_tensor", C.NAN_IN_PROBS, 95, r"probability tensor contains either `?inf`?, `?nan`?",
        "probability tensor", phase=P.SERVING,
        example="RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"),
    sig("nan_multinomial_assert", C.NAN_IN_PROBS, 95, r"cumdist\[size - 1\] > static_cast|binarySearchForMultinomial",
        ("cumdist", "binarySearchForMultinomial"), phase=P.SERVING,
        example="MultinomialKernel.cu:112: binarySearchForMultinomial: block: [0,31,0], thread: [0,0,0] "
        "Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed."),
    sig("nan_in_logits", C.NAN_IN_PROBS, 95,
        r"Detected errors during sampling|NaN (?:or Inf )?(?:detected )?in (?:the )?(?:logits|probs|probabilit)",
        ("Detected errors during sampling", "NaN"), phase=P.SERVING, in_warnings=True,
        example="Detected errors during sampling! NaN in the logits."),
    # cuda_device_assert: a device-side assertion.
    # ROCm's runtime aborting a queue on a kernel's hardware exception (`HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation
    # resulted in a hardware exception`): the kernel faulted, as CUDA's illegal address or instruction says. Below a
    # device-side assertion, which ends in the same trap and says more.
    sig("hsa_hardware_exception", C.ILLEGAL_MEMORY_ACCESS, 70,
        r"HSA_STATUS_ERROR_EXCEPTION\b|HSAIL operation resulted in a hardware exception", ("HSA_STATUS", "HSAIL"),
        any_level=True,
        example=":0:rocdevice.cpp :2982: 1234567 us: Callback: Queue 0x7f0012340000 aborting with error : "
        "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016"),
    sig("kernel_assertion", C.CUDA_DEVICE_ASSERT, 78,
        r"(?:block: \[\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+\]|\.cuh?:\d+:).*Assertion .+ failed",
        "Assertion",
        example="../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [285,0,0], "
        'thread: [66,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'),
    sig("device_side_assert", C.CUDA_DEVICE_ASSERT, 72,
        r"device-side assert(?:ion)? triggered|cudaErrorAssert|CUDA_ERROR_ASSERT",
        ("device-side assert", "cudaErrorAssert", "CUDA_ERROR_ASSERT"),
        example="torch.AcceleratorError: CUDA error: device-side assert triggered"),
    sig("cuda_result_assert", C.CUDA_DEVICE_ASSERT, 72, rf"{CUDA_RESULT}710{CUDA_CODE_END}", CUDA_RESULT_NEEDLES,
        any_level=True, example="CUresult error result=710 func=cuStreamSynchronize"),
    # illegal_memory_access: a kernel touched memory it must not.
    # A fault poisons the CUDA context: stated at any level (vLLM logs it at WARNING while failing to
    # pickle the failed step's inputs), the GPU faulted.
    sig("illegal_memory_access", C.ILLEGAL_MEMORY_ACCESS, 80,
        r"(?i)illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|misaligned address"
        r"|an illegal instruction was encountered|cudaErrorIllegalInstruction|CUDA_ERROR_ILLEGAL_INSTRUCTION"
        r"|Warp Illegal Address|Memory access fault by GPU|HSA_STATUS_ERROR_MEMORY_(?:FAULT|APERTURE_VIOLATION)"
        r"|MPU address access is invalid",  # Ascend CANN: the memory protection unit refused a core's access
        ("illegal memory access", "IllegalAddress", "ILLEGAL_ADDRESS", "misaligned address", "Illegal Address",
         "illegal instruction", "IllegalInstruction", "ILLEGAL_INSTRUCTION",
         "Memory access fault", "HSA_STATUS_ERROR_MEMORY", "MPU address"), any_level=True,
        example="RuntimeError: CUDA error: an illegal memory access was encountered"),
    sig("cuda_result_illegal_address", C.ILLEGAL_MEMORY_ACCESS, 78, rf"{CUDA_RESULT}700{CUDA_CODE_END}",
        CUDA_RESULT_NEEDLES, any_level=True, example="CUDA driver error: 700 (cuMemcpyDtoH)"),
    # cuda_graph_capture_failed: CUDA graph capture.
    # A CUDA failure NCCL reports (`Cuda failure '...'`) that is a stream-capture violation (a collective issued inside
    # a graph capture that depends on work outside it): the capture failed, whoever reports it and at whatever level.
    sig("nccl_cuda_capture_violation", C.CUDA_GRAPH_CAPTURE_FAILED, 77,
        r"(?i:cuda failure) ?\d* ?'?(?:dependency created on uncaptured work|operation not permitted when stream is "
        r"capturing|operation would make the legacy stream depend on a capturing|[^']{0,60}\bcaptur)",
        ("uda failure", "UDA failure"), any_level=True,
        example="h1:77:77 [0] enqueue.cc:267 NCCL WARN Cuda failure 'dependency created on uncaptured work in another "
        "stream'"),
    sig("capture_failed", C.CUDA_GRAPH_CAPTURE_FAILED, 70,
        r"Capture cuda graph failed|CUDA graph capture failed|Breakable CUDA graph failed"
        r"|(?i:piecewise cuda ?graph .{0,40}failed)",
        ("Capture cuda graph failed", "CUDA graph capture failed", "CUDA graph failed", "iecewise"),
        phase=P.CUDA_GRAPH_CAPTURE,
        example="Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing"),
    # An operation the runtime forbids while a stream captures (CUDA's and HIP's wording alike, events included).
    sig("stream_capturing", C.CUDA_GRAPH_CAPTURE_FAILED, 70,
        r"operation not permitted when stream is capturing|cudaErrorStreamCapture\w*|capture (?:has been )?invalidated"
        r"|during CUDA graph capture|cudaStreamCaptureStatusActive|(?i:previous error during capture)"
        r"|(?i:recorded in a capturing stream)|(?:cuda|hip)ErrorCapturedEvent|hipErrorStreamCapture\w*"
        r"|dependency created on uncaptured work|depend on a capturing blocking stream",
        ("stream is capturing", "cudaErrorStreamCapture", "invalidated", "CUDA graph capture", "cudaStreamCapture",
         "during capture", "capturing stream", "CapturedEvent", "hipErrorStreamCapture", "uncaptured work",
         "capturing blocking stream"),
        phase=P.CUDA_GRAPH_CAPTURE,
        example="RuntimeError: CUDA error: operation not permitted when stream is capturing"),
)
