"""Signature rows about the device and the launch configuration: NaN in sampling, rejected arguments, memory held
by others, the KV cache, ports, unsupported configurations and architectures, out of memory, CUDA faults and graphs,
NCCL, and kernels built at start-up. Part of the signature table (signatures.py assembles it, in this order; see its
docstring for the specificity bands).
"""

from __future__ import annotations

from orchestrator.knowledge.families import ARGS_FRAMES
from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import states_without_fallback
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

_ARCH = r"(?:Ampere|Hopper|Blackwell|Turing|Volta|Ada(?: Lovelace)?|sm_?\d{2,3}a?|SM ?\d{2,3}a?)\b"
_BAD_INPUT = r"(?:ValueError|IndexError|KeyError|TypeError|AssertionError|ArgumentError|ArgumentTypeError)"

DEVICE_ROWS: tuple[Signature, ...] = (
    # NaN/inf reaching the sampler: torch.multinomial's checks, SGLang's NaN detector.
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
    # Invalid arguments: argparse's rejection, and value checks that name the argument rule.
    sig("argparse_error", C.INVALID_ARGUMENT, 90,
        r"^[\w.\-/ ]{1,60}: error: (?:unrecognized arguments|argument |the following arguments are required"
        r"|ambiguous option|invalid choice|expected (?:one|at least one) argument|one of the arguments|not allowed)",
        ": error: ", phase=P.ARG_PARSE, any_level=True,
        example="sglang serve: error: argument --attention-backend: invalid choice: 'foo' (choose from 'fa3')"),
    # The engine's argument class refusing a keyword it does not know (a caller passing an argument that was renamed or
    # removed): the programmatic twin of argparse's `unrecognized arguments`.
    sig("engine_args_unknown_keyword", C.INVALID_ARGUMENT, 60,
        r"\b(?:(?:Async)?EngineArgs|ServerArgs|(?:Async)?LLM(?:Engine)?)\.__init__\(\) "
        r"got an unexpected keyword argument",
        "unexpected keyword argument", phase=P.ARG_PARSE,
        example="TypeError: EngineArgs.__init__() got an unexpected keyword argument 'use_v2_block_manager'"),
    sig("not_divisible", C.INVALID_ARGUMENT, 55, r"(?:must|should) be divisible by|is not divisible by",
        "divisible", phase=P.ARG_PARSE,
        example="ValueError: Total number of attention heads (64) must be divisible by tensor parallel size (3)."),
    # A shape that the parallel size splits unevenly, blamed on the parallel size (a quantized group, a block).
    sig("parallel_size_misfit", C.INVALID_ARGUMENT, 55,
        r"(?:caused by|due to|because of) (?:an? |the )?too (?:large|big|high) (?:a )?(?:tensor|pipeline|expert)"
        r"[ _-]?parallel(?:ism)?(?: size)?|(?:input|output) size (?:is )?not aligned with the quantized weight",
        ("parallel", "not aligned"), phase=P.MODEL_LOAD,
        example="ValueError: The input size is not aligned with the quantized weight shape. This can be caused by "
        "too large tensor parallel size."),
    sig("exception_in_arg_parsing", C.INVALID_ARGUMENT, 45, rf"^(?:[\w.]+\.)?{_BAD_INPUT}\b",
        "Error", phase=P.ARG_PARSE, context="(?m)" + ARGS_FRAMES,
        example="IndexError: list index out of range"),
    # Another process holds the GPU memory (see verdict.py for the OOM-text rule).
    sig("memory_unbalanced", C.GPU_MEMORY_IN_USE, 90,
        r"memory capacity is unbalanced|GPUs? may be occupied by other processes|GPU memory used by other processes"
        r"|Free memory on device .{0,60} is less than desired GPU memory utilization"
        r"|(?:other|another) process(?:es)? (?:sharing|using|holding|occupying) (?:the same )?"
        r"(?:container|GPUs?|device)",
        ("unbalanced", "occupied by other processes", "used by other processes", "Free memory on device",
         "other process", "another process"),
        example="RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes."),
    # KV cache too small for the model's context, or exhausted at run time.
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
    sig("kv_cache_words", C.KV_CACHE_TOO_SMALL, 70,
        r"(?i)\bkv[ _-]?cache\b.{0,80}\b(?:too small|insufficient|not enough|exceeds?|exhausted|smaller than|"
        r"no (?:free|available) (?:space|blocks|memory))|\b(?:insufficient|not enough) (?:memory|space|blocks) for "
        r"(?:the )?kv[ _-]?cache|max_total_num_tokens.{0,60}(?:too small|<=? ?0|must be (?:positive|larger|greater))"
        r"|(?:increase|raise) (?:the )?(?:--mem-fraction-static|--gpu-memory-utilization|gpu_memory_utilization)",
        ("KV", "kv", "Kv", "max_total_num_tokens", "mem-fraction-static", "memory-utilization", "memory_utilization"),
        phase=P.MEMORY_ALLOC, vocabulary=states_without_fallback,
        example="RuntimeError: KV cache is too small for the requested context length (32768 tokens)."),
    sig("kv_runtime_exhausted", C.KV_CACHE_TOO_SMALL, 85, r"(?i)out of memory\. Try to lower your batch size",
        "Try to lower your batch size", phase=P.SERVING,
        example="Decode out of memory. Try to lower your batch size."),
    # Ports.
    sig("port_in_use", C.PORT_IN_USE, 85,
        r"(?i)address already in use|\[Errno 98\]|EADDRINUSE|is not available in \d+ seconds"
        r"|port (?:\d+ )?is (?:already )?(?:in use|occupied)",
        ("ddress already in use", "Errno 98", "EADDRINUSE", "is not available in", "already in use", "occupied"),
        example="zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30233')"),
    # Unsupported configurations and kernels that do not run on this GPU.
    # A quantization the engine refuses for this model or with these flags; refused for this GPU (`for the current
    # GPU. Minimum capability: 90`), it is the architecture's, told by the arch rows below.
    sig("quantization_not_supported", C.UNSUPPORTED_CONFIG, 82,
        r"(?i:quantization (?:method|scheme|type) \S+ (?:is )?not supported)(?! for (?:the current|this|your) "
        r"(?:GPU|device|platform))",
        ("quantization", "Quantization"), phase=P.MODEL_LOAD,
        example="ValueError: Quantization scheme fp8 is not supported for this model."),
    # No kernel built for this GPU, or a kernel image the device rejects as invalid (a cubin built for another
    # architecture, loaded by a JIT cache or a prebuilt wheel).
    sig("no_kernel_image", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 80,
        r"no kernel image is available for execution|NoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU"
        r"|(?:CUDA|HIP) error: invalid device function|(?:cuda|hip)ErrorInvalidDeviceFunction|hipErrorNoBinaryForGpu"
        r"|No compatible code objects? found|CUDA_ERROR_INVALID_IMAGE|device kernel image is invalid"
        r"|cudaErrorInvalidKernelImage|hipErrorInvalidImage",
        ("kernel image", "NoKernelImage", "NO_BINARY_FOR_GPU", "invalid device function", "InvalidDeviceFunction",
         "NoBinaryForGpu", "compatible code object", "INVALID_IMAGE", "InvalidKernelImage", "InvalidImage"),
        example="torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device"),
    sig("arch_required", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 80,
        rf"(?i)\b(?:only supports?|requires?|only (?:be )?(?:supported|available|works?) (?:on|for|with))\s+"
        rf"(?:an?\s+|the\s+)?(?:NVIDIA\s+)?{_ARCH}"
        rf"|\bnot supported on (?:this |the current )?(?:GPU|device|arch\w*)|\b{_ARCH} is not supported"
        r"|\bdoes(?: not|n't) support\b.{0,80}\bon (?:this|the current|your) (?:GPU|device)\b"
        r"|compute capability (?:of )?(?:at least|>=?|below|lower than)"
        rf"|(?i:unsupported (?:gpu |arch\w* |compute capability|device capability)(?!\w* ?'compute_)"
        rf"|not (?:compiled|built) for (?:this|the "
        rf"current|your) (?:gpu|arch\w*|device))|{_ARCH} (?:is |are )?not (?:yet )?supported",
        ("Ampere", "Hopper", "Blackwell", "Turing", "Volta", "Ada", "SM", "sm_", "sm1", "sm8", "sm9", "support",
         "capability", "compiled for", "built for"),
        example="RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
    # A refusal that gives the GPU's compute capability as its reason (`Minimum capability: 80. Current capability:
    # 75`, Marlin's `Only types = [] are supported (for ..., min_capability = 70)`): the architecture lacks the kernel,
    # also where the refusal is worded as a quantization scheme's (it outranks that row).
    sig("capability_refused", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 83,
        r"(?i)(?:not supported|does not support|unsupported|only|requires?)\b.{0,200}\b(?:min(?:imum)?[_ ]capability"
        r"|current capability)\s*[:=]\s*\d{2,3}\b",
        ("capability", "Capability"),
        example="ValueError: The quantization method awq is not supported for the current GPU. Minimum capability: "
        "80. Current capability: 75."),
    sig("smem_out_of_resources", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 78,
        r"OutOfResources|out of resource: shared memory|without targeting appropriate compute capability",
        ("OutOfResources", "out of resource", "compute capability"),
        example="triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 232448, "
        "Hardware limit: 101376."),
    sig("invalid_backend", C.UNSUPPORTED_CONFIG, 60,
        r"Invalid attention backend|(?i:(?:attention )?backend \S+ (?:is )?not (?:supported|available))"
        r"|(?i:\bno (?:valid|suitable|compatible|available) (?:\w+ )?backends? (?:was |were )?found\b)",
        ("Invalid attention backend", "backend"),
        example="ValueError: Invalid attention backend for cuda, with use_v1: False use_mla: False"),
    sig("model_not_supported", C.UNSUPPORTED_CONFIG, 60,
        r"Model architectures? \[.*\] (?:is|are) not supported|Unrecognized (?:configuration class|model)"
        r"|does not recognize this architecture",
        ("Model architecture", "Unrecognized", "does not recognize"),
        example="ValueError: Model architectures ['FooForCausalLM'] are not supported for now."),
    sig("dsa_fp8_kv_assert", C.UNSUPPORTED_CONFIG, 70, r"^AssertionError\s*$", "AssertionError",
        context=r"[dn]sa_kv_cache_store_fp8", example="AssertionError"),
    sig("not_supported", C.UNSUPPORTED_CONFIG, 50,
        r"(?i)\b(?:is|are) not (?:yet )?supported\b|\bnot (?:yet )?supported (?:for|with|by|when|on|in)\b"
        r"|\bunsupported (?:\w+ ){0,2}(?:config\w*|combination|dtype|data ?type|quantization|model|backend|option"
        r"|mode|value|format|feature|arch\w*)\b|\bdoes(?: not|n't) (?:yet )?support\b|\bonly supports?\b"
        r"|\bonly (?:be )?supported (?:on|for|with|by|in|when|if)\b|\bno longer supports?\b|\bno longer supported\b"
        r"|\bsupports? [^.;]{1,80}, but got\b",
        ("support", "Support"),
        example="ValueError: This configuration is not supported on this platform."),
    sig("flag_combination", C.UNSUPPORTED_CONFIG, 55,
        r"(?i)\b(?:is|are) (?:not )?(?:compatible|incompatible) with\b|\b(?:is|are) required (?:when|if|with)\b"
        r"|\bcannot be (?:used|enabled|combined|set|"
        r"specified) (?:together )?(?:with|when|alongside)\b|\bmutually exclusive\b|\bconflicts? with\b"
        r"|\b(?:must|should) (?:also )?be (?:used|set|enabled|specified) (?:together )?(?:with|when)\b"
        r"|\bonly (?:be )?(?:used|enabled|allowed|valid) (?:with|when|if|for)\b|\brequires? (?:setting |enabling )?--\w"
        r"|\b(?:when|with|if) (?:using |enabling )?--[\w-]+.{0,80}\b(?:must|cannot|can't|not allowed|requires?)\b",
        ("ompatible", "cannot be", "exclusive", "onflict", "must", "should", "only", "requir", "--"),
        example="ValueError: --enable-dp-attention cannot be used with --disable-radix-cache"),
    sig("unsupported_word", C.UNSUPPORTED_CONFIG, 40,
        r"(?i)(?<!\.)\bunsupported\b(?! operand)|\bnot (?:yet )?(?:been )?(?:supported|implemented)\b|\bnot support\b",
        ("nsupported", "NSUPPORTED", "supported", "implemented", "ot support"),
        example="RuntimeError: Unsupported head_dim: 96"),  # not a dotted name's part (`torch._dynamo.exc.Unsupported`)
    sig("not_implemented", C.UNSUPPORTED_CONFIG, 45, r"\bNotImplementedError\b", "NotImplementedError",
        example="NotImplementedError: fp8 kv cache is not implemented for this backend"),
    # A kernel's assert that a size is one of the few it was written for (`assert head_size in [64, 128, 256]`):
    # the model or the flags ask for a shape the kernel does not have.
    sig("supported_sizes_assert", C.UNSUPPORTED_CONFIG, 40,
        r"^assert\s+[\w.\[\]()]+\s+in\s+[\{\[\(]\s*(?:\d+\s*,\s*)+\d+\s*,?\s*[\}\]\)]\s*(?:,.*)?$", "assert ",
        context=r'File "', example="assert Lk in {16, 32, 64, 128}"),
    # A kernel backend refusing the dtype of the tensors it is given (a checkpoint quantized otherwise than the backend
    # expects): TVM-FFI's `Check failed: w.dtype() == ...` in FlashInfer's kernels, `weights must be fp8`.
    sig("backend_dtype_check", C.UNSUPPORTED_CONFIG, 56,
        r"Check failed: \S+\.dtype\(\) ==|(?i:\b\w*(?:weights?|inputs?|tensors?|activations?|scales?)\b.{0,20}"
        r"\bmust be (?:of (?:dtype|type) )?(?:fp8|fp4|nvfp4|mxfp4|bf16|fp16|float8\w*|bfloat16|float16|int8|int4)\b)",
        ("Check failed", "must be"),
        example="tvm.error.InternalError: Check failed: gemm1_weights.dtype() == dl_float8_e4m3fn (int8 vs. "
        "float8_e4m3fn) : FP8 block scale MoE: gemm1_weights must be fp8."),
    sig("assert_in_config_code", C.UNSUPPORTED_CONFIG, 35, r"^AssertionError\b", "AssertionError",
        context=r"(?i)kv_cache_dtype|fp8|fp4|nvfp4|quant|_backend\b|backend\.py", example="AssertionError"),
    # Out of memory, on any accelerator PyTorch drives (CUDA, ROCm's HIP, Ascend's NPU, Intel's XPU, Apple's MPS, ...):
    # the same statement of the device's memory running out, whoever logs it and at whatever level.
    sig("cuda_oom", C.CUDA_OOM, 80,
        r"(?:CUDA|HIP|NPU|XPU|MPS|MLU|GCU|MUSA) out of memory|OutOfMemoryError|(?:CUDA|HIP) error: out of memory"
        r"|cudaErrorMemoryAllocation|hipErrorOutOfMemory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
        ("out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation", "hipErrorOutOfMemory", "_ALLOC_FAILED"),
        any_level=True,
        example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 380.00 MiB."),
    # NCCL's report of the CUDA call that failed (`Last error: Cuda failure 'out of memory'`): the cause of its error.
    sig("nccl_cuda_oom", C.CUDA_OOM, 82, r"(?i:cuda failure \d*\s*'?out of memory)", ("uda failure", "UDA failure"),
        any_level=True, example="Cuda failure 'out of memory'"),
    # Likewise a CUDA failure NCCL reports that is a stream-capture violation (a collective issued inside a graph
    # capture that depends on work outside it): the capture failed, whoever reports it and at whatever level.
    sig("nccl_cuda_capture_violation", C.CUDA_GRAPH_CAPTURE_FAILED, 77,
        r"(?i:cuda failure) ?\d* ?'?(?:dependency created on uncaptured work|operation not permitted when stream is "
        r"capturing|operation would make the legacy stream depend on a capturing|[^']{0,60}\bcaptur)",
        ("uda failure", "UDA failure"), any_level=True,
        example="h1:77:77 [0] enqueue.cc:267 NCCL WARN Cuda failure 'dependency created on uncaptured work in another "
        "stream'"),
    sig("out_of_memory", C.CUDA_OOM, 55, r"(?i)\bout of memory\b", ("out of memory", "Out of memory", "OUT OF MEMORY"),
        example="RuntimeError: out of memory"),
    # CUDA faults. A fault poisons the CUDA context: stated at any level (vLLM logs it at WARNING while failing to
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
    sig("kernel_assertion", C.CUDA_DEVICE_ASSERT, 78,
        r"(?:block: \[\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+\]|\.cuh?:\d+:).*Assertion .+ failed",
        "Assertion",
        example="../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [285,0,0], "
        'thread: [66,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'),
    sig("device_side_assert", C.CUDA_DEVICE_ASSERT, 72,
        r"device-side assert(?:ion)? triggered|cudaErrorAssert|CUDA_ERROR_ASSERT",
        ("device-side assert", "cudaErrorAssert", "CUDA_ERROR_ASSERT"),
        example="torch.AcceleratorError: CUDA error: device-side assert triggered"),
    # CUDA graphs.
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
    # NCCL and torch.distributed. The watchdog's own notice that it saw `either an error or timeout` says which it
    # was only in the line that follows (`Timeout at NCCL work: N`, a collective operation timeout, an NCCL error).
    sig("nccl_error", C.NCCL_ERROR, 80,
        r"[NR]CCL error|nccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error"
        r"|DistBackendError|Watchdog caught collective operation timeout|\bTimeout at NCCL work\b"
        r"|ProcessGroupNCCL(?!.{0,120}either an error or timeout).{0,80}(?:[Ee]rror|timeout)",
        ("NCCL", "nccl", "RCCL", "DistBackendError", "Watchdog caught collective"), any_level=True,
        example="RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"),
    # NCCL's shared-memory transport cannot create its segment (`/dev/shm` too small, as in a container's 64 MB
    # default): the line NCCL gives as its "Last error", more specific than the wrapper that reports it.
    sig("nccl_shm_segment", C.NCCL_ERROR, 82,
        r"Error while (?:creating|attaching to|mapping|opening|truncating) shared memory segment",
        "shared memory segment", any_level=True,
        example="Error while creating shared memory segment /dev/shm/nccl-F9ffgB (size 9637888)"),
    sig("nccl_warn_connection", C.NCCL_ERROR, 76,
        r"NCCL WARN .{0,160}(?:connection abort|[Cc]onnection reset|unhandled (?:system|cuda) error|[Tt]imeout"
        r"|timed out)",
        "NCCL WARN", in_warnings=True,
        example="h1:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.2<38455> failed : "
        "Software caused connection abort"),
    # A CUDA call that failed inside a collective's own kernel (vLLM's and SGLang's custom all-reduce print
    # `Failed: Cuda error <file>:<line> '<reason>'`, with no level): the distributed runtime failed, at any level. A
    # reason that names a cause of its own (out of memory, an illegal access) is told by those rows, which rank higher.
    sig("collective_cuda_error", C.NCCL_ERROR, 74,
        r"(?i:cuda (?:error|failure)) \S*(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|nccl|collective)"
        r"\S*:\d+",
        ("uda error", "uda failure", "UDA error"), any_level=True,
        example="Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'"),
    sig("dist_init_failed", C.NCCL_ERROR, 60,
        r"DistNetworkError|(?:c10d|TCPStore|gloo).{0,80}(?:Connection refused|timed? ?out|failed)"
        r"|init_process_group.{0,60}(?:failed|timed? ?out)",
        ("DistNetworkError", "c10d", "TCPStore", "gloo", "init_process_group"),
        example="torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to "
        "connect to (127.0.0.1, 29500)."),
    # Ray, the runtime that places a multi-node engine's workers, that cannot give the engine its GPUs (none on the
    # node the driver runs on, fewer in the placement group than the parallel sizes ask): the distributed runtime
    # failed to set up, like a rendezvous that cannot connect.
    sig("ray_placement_failed", C.NCCL_ERROR, 62,
        r"Ray does not allocate any GPUs on the driver node"
        r"|(?i:(?:required|requested) (?:number of )?GPUs? exceeds? the (?:total )?number of (?:available )?GPUs? in "
        r"the placement group)|(?i:placement group .{0,80}(?:cannot|could not|failed to) (?:be )?(?:created|scheduled"
        r"|placed|fulfilled))",
        ("Ray does not allocate", "placement group"),
        example="ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement "
        "group or running the driver on a GPU node."),
    # Kernels built at start-up (FlashInfer, DeepGEMM, Triton, torch extensions).
    sig("jit_build_failed", C.KERNEL_JIT_ERROR, 75,
        r"(?i)ninja build failed|ninja: build stopped|Ninja is required to load C\+\+ extensions"
        r"|No such file or directory: '?ninja|Error building extension|CalledProcessError: Command .{0,40}ninja"
        r"|nvcc fatal|ptxas (?:fatal|error)|\.cuh?\(\d+\): error|nvrtc: error|NVRTC_ERROR"
        r"|fatal error: \S+\.(?:h|hpp|cuh): No such file|triton\.compiler\.errors\.\w+|CompilationError"
        r"|\bjit\b.{0,60}\b(?:compil\w*|build)\b.{0,30}\b(?:failed|error)|failed to (?:jit[- ])?compile"
        r"|LLVM ERROR|collect2: error|undefined reference to|error: identifier .{1,80} is undefined|\bcicc\b"
        r"|(?i:(?:cuda|kernel|cubin|ptx) compilation (?:failed|error))|error: command '.{0,120}(?:nvcc|gcc|g\+\+|c\+\+"
        r"|clang\S*)' failed|PassManager::run failed|(?i:error (?:while |when )?(?:compiling|building) (?:the )?"
        r"(?:kernel|extension|module|cubin))|(?i:(?:cute|cutlass)[ _-]?dsl.{0,80}(?:error|failed))|\bMLIRError\b",
        ("inja", "Error building extension", "nvcc", "ptxas", "): error", "nvrtc", "NVRTC", "fatal error:",
         "triton.compiler", "CompilationError", "JIT", "jit", "compile", "LLVM ERROR", "collect2",
         "undefined reference",
         "is undefined", "cicc", "ompilation", "error: command", "PassManager", "ompiling", "uilding", "DSL", "dsl",
         "MLIRError"),
        example="RuntimeError: Ninja build failed. Ninja output:"),
    # The toolchain a JIT build needs is missing (Triton's C compiler, torch extensions' CUDA_HOME or nvcc).
    sig("jit_toolchain_missing", C.KERNEL_JIT_ERROR, 72,
        r"Failed to find C compiler|CUDA_HOME environment variable is not set"
        r"|(?i:(?:could not|cannot|can't|unable to|failed to) (?:find|locate) (?:the )?(?:a )?"
        r"(?:nvcc|hipcc|cuda compiler|c\+\+ compiler|c compiler|ninja)\b)",
        ("C compiler", "CUDA_HOME", "find", "locate"),
        example="RuntimeError: Failed to find C compiler. Please specify via CC environment variable."),
    # Ascend's CANN reports an operator compiler that does not start in its error trace (`[Init][Compiler]Init
    # compiler failed`, `OpCompileProcessor init failed!`), lines it prints without a level and often indented: the
    # kernels cannot be built, whatever the line looks like.
    sig("op_compiler_init_failed", C.KERNEL_JIT_ERROR, 74,
        r"(?i:\binit(?:iali[sz]e)? compiler failed|\bcompiler init(?:iali[sz]ation)? failed)"
        r"|OpCompile\w* init(?:iali[sz]ation)? failed",
        ("compiler failed", "Compiler failed", "init failed", "initialization failed"), any_level=True,
        example="[Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]"),
    # A compiler run as a subprocess (Triton's helper build, torch extensions, JIT kernels) that failed: Python's
    # CalledProcessError wording, also where a warning reports it (SGLang skips a model module whose import built
    # one, and the model then looks unsupported).
    sig("compiler_command_failed", C.KERNEL_JIT_ERROR, 74,
        r"Command '\[?'?(?:[^'\s]*[/\\])?(?:gcc|g\+\+|cc|c\+\+|clang\+*|nvcc|hipcc|ninja|cmake|make|tcc|icx|cl|ld"
        r"|ptxas)(?:-\d+)?(?:\.exe)?'.{0,4000}"
        r"returned non-zero exit status",
        "returned non-zero exit status", in_warnings=True,
        example="Command '['/usr/bin/gcc', '/tmp/x/main.c', '-O3', '-shared', '-fPIC', '-o', '/tmp/x/cuda_utils.so', "
        "'-lcuda']' returned non-zero exit status 1."),
)
