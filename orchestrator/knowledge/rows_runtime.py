"""Signature rows for families stated by the runtime's own vocabulary rather than a Python exception.

A CUDA driver or runtime call's numeric result (`CUresult error result=2`: the driver API and the runtime API share
their numbers for these: 2 out of memory, 209 no kernel image for this GPU, 700 an illegal address, 710 a device-side
assert); a C/C++/CUDA compiler's own diagnostic (`file.cuh:95:52: error: ...`), which a JIT build prints indented
inside its log; Ray waiting for a placement group it cannot place (vLLM logs the wait at INFO, forever); Ascend's
CANN error codes of its collective library (HCCL's `EI####`), the NPU's NCCL; a Python built-in error's own message
quoted without its type (`integer division or modulo by zero`); an NPU/XPU extension module that was never imported.
See signatures.py for the specificity bands.
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

_RESULT = (
    r"(?:\b(?:CUresult|cudaError(?:_t)?|CUDA (?:driver |runtime )?(?:API )?(?:error|failure|call failed|result))\b"
    r"|\bcu(?:Mem\w+|Malloc\w*|Ctx\w+|Module\w+|LaunchKernel\w*|GraphInstantiate\w*)\b.{0,40}?"
    r"\b(?:failed|error|returned|result))"
    r"[^0-9\n]{0,24}?(?<![\w.])"
)
"""A CUDA call's numeric result: `CUresult error  result=2`, `CUDA driver error: 2`, `cuMemCreate failed with error
700`. The number follows within a few characters."""
_CODE_END = r"(?![\w.])"
_RESULT_NEEDLES = ("CUresult", "cudaError", "CUDA", "cuMem", "cuMalloc", "cuCtx", "cuModule", "cuLaunch", "cuGraph")

NAMED_PYTHON_ERRORS = frozenset({"python_builtin_message"})
"""Rows that name a Python error by its own words: beside a follow-up on the same line they still say what failed."""

_TOKENIZER_WORDS = (
    r"(?:\b(?!\w*Logits)\w*(?:Tokenizer|Processor)(?:Fast)?\b|\b(?:de)?tokeniz\w*|\bvocabular(?:y|ies)\b"
    r"|\bchat[_ ]template\b)"
)

_CHECKPOINT_WORDS = (
    r"(?:\b[Cc]heckpoints?\b|\bsafetensors?\b|\.safetensors\b|\bstate_dict\b|\bweight_map\b"
    r"|\bmodel\.safetensors\.index\.json\b|\bpytorch_model\b|\.gguf\b)"
)

RUNTIME_ROWS: tuple[Signature, ...] = (
    sig("cuda_result_out_of_memory", C.CUDA_OOM, 78, rf"{_RESULT}2{_CODE_END}|\bCUDA_ERROR_OUT_OF_MEMORY\b",
        (*_RESULT_NEEDLES, "CUDA_ERROR_OUT_OF_MEMORY"), any_level=True,
        example="[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp "
        "func=cu_mem_create line=103"),
    sig("cuda_result_no_kernel_image", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 78,
        rf"{_RESULT}209{_CODE_END}|\bCUDA_ERROR_NO_BINARY_FOR_GPU\b",
        (*_RESULT_NEEDLES, "CUDA_ERROR_NO_BINARY_FOR_GPU"), any_level=True,
        example="cuModuleLoadData failed with error 209"),
    sig("cuda_result_illegal_address", C.ILLEGAL_MEMORY_ACCESS, 78, rf"{_RESULT}700{_CODE_END}", _RESULT_NEEDLES,
        any_level=True, example="CUDA driver error: 700 (cuMemcpyDtoH)"),
    sig("cuda_result_assert", C.CUDA_DEVICE_ASSERT, 72, rf"{_RESULT}710{_CODE_END}", _RESULT_NEEDLES,
        any_level=True, example="CUresult error result=710 func=cuStreamSynchronize"),
    # XLA's (TPU, JAX) status for a device allocation that did not fit: `RESOURCE_EXHAUSTED: ... Attempting to reserve
    # 6.14G at the bottom of memory`, `RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in HBM`.
    sig("xla_resource_exhausted", C.CUDA_OOM, 72,
        r"\bRESOURCE_EXHAUSTED\b.{0,240}?(?i:\bmemory\b|\breserve\b|\ballocat\w*|\bHBM\b|\bvmem\b"
        r"|\d(?:\.\d+)? ?[GMK]i?B?\b)",
        "RESOURCE_EXHAUSTED", any_level=True,
        example="RESOURCE_EXHAUSTED: Error loading program 'jit_f': Attempting to reserve 6.14G at the bottom of "
        "memory. That was not possible."),
    # The model hub refused the download (401/403 for a gated or private repository, 404 for one that is not there):
    # the checkpoint cannot be fetched, as `GatedRepoError` says in other words.
    sig("hub_http_refused", C.WEIGHTS_LOAD_ERROR, 64,
        r"\b(?:401|403|404) Client Error: .{0,80} for url: https?://(?:huggingface\.co|hf\.co|[\w.\-]*modelscope\.\w+)/",
        ("Client Error",), phase=P.MODEL_LOAD,
        example="requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
        "https://huggingface.co/org/model/resolve/main/config.json"),
    # A compiler's diagnostic in its own format (gcc/clang `file:line:col: error:`, nvcc's `file(line): error`) on a C,
    # C++ or CUDA source: the JIT build failed there, whatever log carries it and however it indents the build's output.
    sig("compiler_diagnostic", C.KERNEL_JIT_ERROR, 74,
        r"(?:^|\s)[\w.\-/\\]*\.(?:cuh?|cpp|cc|cxx|c|hpp|hh|h|inl|cu\.inc)(?:(?::\d+){1,2}|\(\d+\)):\s*(?:fatal )?"
        r"error\b",
        (": error", ": fatal error"), any_level=True,
        example="  activation.cuh:95:52: error: type/value mismatch at argument 1 in template parameter list"),
    # The linker of such a build (Triton links its launcher against libcuda with the system's compiler): a library it
    # cannot find or a symbol it cannot resolve fails the build. ld's own `cannot find -lcuda` has no literal the
    # prefilter anchors on; gcc's `collect2: error: ld returned 1 exit status` after it always does.
    sig("linker_error", C.KERNEL_JIT_ERROR, 74,
        r"(?:^|[\s/])ld(?:\.\w+)?: (?:cannot find -l\S+|error\b)|\bld returned [1-9]\d* exit status"
        r"|\bundefined reference to [`'\"]",
        ("ld: cannot find", "ld: error", "ld returned", "undefined reference"), any_level=True,
        example="collect2: error: ld returned 1 exit status"),
    # Ray cannot place the bundles the engine asked for (too few GPUs, a node missing, GPUs of another type): vLLM
    # logs the wait at INFO each time it doubles, and the start-up hangs. A server that starts after the wait outlived
    # it (survival applies, as to any hang).
    sig("ray_placement_wait", C.HANG_OR_TIMEOUT, 52,
        r"(?i:\bwaiting for (?:creating |the )?(?:a )?placement group\b"
        r"|\bplacement group\b.{0,80}\b(?:pending|not (?:yet )?(?:ready|created|placed|scheduled))\b"
        r"|\bcannot be scheduled right now\b)",
        ("lacement group", "cannot be scheduled right now", "Waiting for", "The actor or task"), any_level=True,
        example="INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs for 150 "
        "seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]."),
    # A scheduler that ended the job at its time limit (Slurm's `*** JOB 12 ON node CANCELLED AT <time> DUE TO TIME
    # LIMIT ***`): the run hung or was too slow and was killed at the deadline.
    sig("job_time_limit", C.HANG_OR_TIMEOUT, 58,
        r"\bCANCELLED AT \S+ DUE TO TIME LIMIT\b|\bTIME LIMIT\b.{0,40}\bexceeded\b",
        ("DUE TO TIME LIMIT", "TIME LIMIT"), any_level=True,
        example="slurmstepd: error: *** JOB 4242 ON gpu-node-3 CANCELLED AT 2025-01-01T10:00:00 DUE TO TIME LIMIT ***"),
    # The scheduler or the platform took the process away for a reason of its own: a job cancelled or preempted
    # (Slurm), a pod evicted (Kubernetes), a spot instance reclaimed. A vLLM sequence group `preempted` for KV space is
    # the engine's own scheduling, not a kill: the words must name a job, pod, node or instance.
    sig("taken_away", C.PROCESS_KILLED, 62,
        r"\bCANCELLED AT \S+(?!\S)(?! DUE TO TIME LIMIT)"
        r"|\bThe node was low on resource\b"
        r"|(?i:\b(?:pod|node|instance|vm|job|container)\b[^.]{0,60}\b(?:was |has been |got |is being )?"
        r"(?:preempted|evicted)\b|\bspot instance\b.{0,60}\b(?:interrupt\w*|reclaim\w*|terminat\w*)\b)",
        ("CANCELLED AT", "The node was low on resource", "reempted", "victed", "Spot instance", "spot instance",
         "REEMPTED", "VICTED", "Preempted", "Evicted"), any_level=True,
        example="Warning  Evicted  kubelet  The node was low on resource: memory. Container vllm was using 60Gi."),
    # A process that stopped answering its peers' liveness checks (vLLM's `No heartbeat received from MQLLMEngine`): it
    # hangs or is stuck, whatever killed it afterwards.
    sig("heartbeat_lost", C.HANG_OR_TIMEOUT, 50,
        r"(?i:\bno heartbeats? (?:received|from)\b|\bheartbeats? (?:timeout|timed out|missed|lost|failed)\b"
        r"|\b(?:became|is|has become) (?:unresponsive|not responding)\b)",
        ("heartbeat", "Heartbeat", "HEARTBEAT", "unresponsive", "not responding"),
        example="TimeoutError: No heartbeat received from MQLLMEngine"),
    # Intel's oneCCL, the XPU's collective library, tags its own errors `|CCL_ERROR|`: the distributed runtime failed,
    # as NCCL's `NCCL WARN` failures say on CUDA. (oneCCL named in prose is vocabulary.DISTRIBUTED's, as HCCL is.)
    sig("ccl_error", C.NCCL_ERROR, 72, r"\|CCL_ERROR\|", "CCL_ERROR", any_level=True,
        example="|CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: condition !check_msg_retval(\"sendmsg\", ...) failed"),
    # Ray's own runtime under a multi-node engine: a worker that cannot register with its raylet, a GCS that cannot be
    # reached. The cluster the collectives run on failed, not the model.
    sig("ray_runtime_failed", C.NCCL_ERROR, 62,
        r"\b(?:Failed|Unable) to register worker\b.{0,120}\b[Rr]aylet\b"
        r"|\bRayletClient\b.{0,80}(?i:\b(?:unable|fail\w*)\b)"
        r"|\bGCS\b.{0,60}(?i:\b(?:unreachable|failed to connect|connection (?:refused|lost)"
        r"|not (?:reachable|respond\w*))\b)",
        ("register worker", "RayletClient", "GCS"), any_level=True,
        example="[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker 0100ff to "
        "Raylet. IOError: [RayletClient] Unable to register worker with raylet. No such file or directory"),
    # Ascend CANN reports an error as `E<module><4 digits>: [PID: n] <time> <message>`; the module letter I is HCCL,
    # the NPU's collective library: its errors are the distributed runtime's, as NCCL's are.
    sig("hccl_error_code", C.NCCL_ERROR, 66, r"(?:^|[\s:\]])EI\d{4}:", "EI",
        any_level=True,
        example="EI0009: [PID: 2225827] 2025-09-24-20:59:48.119.066 Transport init error. Reason: [Create][DestLink]"
        "Create Dest error!"),
    sig("cann_error_code", C.UNKNOWN, 13, r"^E[A-Z0-9]\d{4}: \[PID: \d+\]", "[PID: ",
        example="EE1001: [PID: 2337] 2025-04-29-08:20:47.065.474 The argument is invalid."),
    # A device extension module (torch_npu, torch_mlu, intel_extension_for_pytorch, ...) named but never imported:
    # the import that defines it did not happen.
    sig("device_extension_undefined", C.IMPORT_ERROR, 60,
        r"^(?:[\w.]+\.)?NameError: name '(?:torch_(?:npu|mlu|musa|gcu|xla)\w*|intel_extension_for_pytorch|ipex"
        r"|habana_frameworks\w*|vllm_ascend\w*|sglang_npu\w*)' is not defined",
        "NameError", phase=P.IMPORT, example="NameError: name 'torch_npu' is not defined"),
    # Ascend's operator store has no kernel of this operator for this chip (CANN's `EZ####` operator errors, `Optype
    # [X] of Ops kernel [AIcoreEngine] is unsupported`): no kernel for this device, as CUDA's `no kernel image`.
    sig("npu_operator_unsupported", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 72,
        r"\bOps? kernel \[\w+\] is (?:unsupported|not supported)|(?:^|[\s:\]])EZ\d{4}:.{0,240}?\b(?:is unsupported"
        r"|is not supported|not support\w*)\b",
        ("kernel [", "EZ"), any_level=True,
        example="EZ3002: [PID: 603] 2025-06-23-10:51:59.636.525 Optype [TransData] of Ops kernel [AIcoreEngine] is "
        "unsupported. Reason: [tbe-custom]:op type TransData is not found in this op store."),
    # Transformers has no tokenizer or processor class for the checkpoint's config: the tokenizer cannot be built (its
    # `... for this kind of AutoModel` twin is the model not being supported).
    sig("auto_tokenizer_unmapped", C.TOKENIZER_OR_TEMPLATE_ERROR, 66,
        r"Unrecognized configuration class .{0,240}? to build an Auto(?:Tokenizer|Processor|ImageProcessor"
        r"|FeatureExtractor)\b",
        "Unrecognized configuration class", phase=P.MODEL_LOAD,
        example="ValueError: Unrecognized configuration class <class 'transformers_modules.m.configuration_m.MConfig'>"
        " to build an AutoTokenizer."),
    # An exception or a failure statement that names the tokenizer, a processor class, the vocabulary or the chat
    # template is about them (`'Qwen2VLProcessor' object has no attribute 'image_token'`, `Unable to load vocabulary
    # from file`, `No tokenizer file found`); a logits processor is sampling's, not the tokenizer's.
    sig("tokenizer_named", C.TOKENIZER_OR_TEMPLATE_ERROR, 44,
        rf"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*?{_TOKENIZER_WORDS}"
        rf"|(?i:\b(?:failed to|unable to|cannot|can't|could not|couldn't|no)\b).{{0,80}}?{_TOKENIZER_WORDS}",
        ("okeniz", "rocessor", "ocabular", "template", "Template"),
        example="AttributeError: 'Qwen2VLProcessor' object has no attribute 'image_token'"),
    # The same for the checkpoint: an exception that names the checkpoint, its safetensors shards, its index or its
    # state dict is about the weights not loading (the specific loader rows of signatures.py say more where they match).
    sig("checkpoint_named", C.WEIGHTS_LOAD_ERROR, 44,
        rf"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*?{_CHECKPOINT_WORDS}",
        ("heckpoint", "afetensors", "state_dict", "weight_map", "index.json", "pytorch_model", ".gguf"),
        example="RuntimeError: checkpoint shard model-00003-of-00004.safetensors is truncated"),
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
    # An operating system error's own words (strerror) carried by a socket, zmq or OS exception: a system call failed,
    # which says nothing about a configuration the engine refuses (`ZMQError: Operation not supported`).
    sig("os_error_message", C.PYTHON_EXCEPTION_OTHER, 42,
        r"^(?:[\w.]+\.)?(?:ZMQError|OSError|IOError|PermissionError|BlockingIOError|socket\.error): (?:\[Errno \d+\] )?"
        r"(?:Operation not (?:supported|permitted)|Permission denied|Bad file descriptor"
        r"|Resource temporarily unavailable|Too many open files)\b",
        ("ZMQError", "OSError", "IOError", "PermissionError", "BlockingIOError", "socket.error"),
        example="zmq.error.ZMQError: Operation not supported"),
    # vLLM's check of the model argument: neither a hub repository id nor a local directory with a config.
    sig("model_reference_invalid", C.INVALID_ARGUMENT, 58,
        r"Invalid repository ID or local directory specified",
        "Invalid repository ID", phase=P.ARG_PARSE,
        example="ValueError: Invalid repository ID or local directory specified: 'some-model-without-org'."),
    # Python's built-in errors state themselves in fixed words; quoted without their type (a server's `Failed to start
    # model server: integer division or modulo by zero`), they are still that Python exception.
    sig("python_builtin_message", C.PYTHON_EXCEPTION_OTHER, 20,
        r"\b(?:integer division or modulo by zero|(?:float )?division by zero|(?:list|tuple|string) index out of range"
        r"|object is not (?:subscriptable|callable|iterable)|unsupported operand type\(s\) for"
        r"|not enough values to unpack|too many values to unpack|missing \d+ required positional arguments?"
        r"|got an unexpected keyword argument"
        r"|takes \d+ positional arguments? but \d+ (?:were|was) given|maximum recursion depth exceeded"
        r"|dictionary changed size during iteration|cannot unpack non-iterable|referenced before assignment)\b",
        ("division", "index out of range", "object is not", "unsupported operand", "values to unpack",
         "required positional", "unexpected keyword", "positional argument", "recursion depth", "changed size",
         "non-iterable", "before assignment"),
        example="Failed to start model server: integer division or modulo by zero"),
)
