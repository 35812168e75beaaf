"""Signature rows built from vocabularies (vocabulary.py): a family told by the words a message uses.

Each row is a family of messages SGLang, vLLM, PyTorch, CUDA, NCCL, DeepGEMM or pydantic print in general:
a refusal that names the GPU architecture; a Python name error for a kernel library that did not import on
this GPU; an operator namespace of a compiled extension that lacks an operator (the extension and the caller
do not match); a compiled extension that is there but does not load (an ABI break, at any level, unlike an optional
module that is absent); a rejected value that names a server argument, or is not among the choices, or a scheduler
limit (max_num_*, *_len) that came out negative; a config validation error; the distributed
runtime below NCCL failing; a c10d socket waiting in vain; a CUDA error that names no cause; weight loading
that did not finish or a loader's shape check; an assertion inside a JIT compiler. See signatures.py for the
specificity bands.
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import (
    ARCH_REFUSAL,
    CACHE_SHORTAGE,
    CHECKPOINT_FAULT,
    CHECKPOINT_NEEDLES,
    DISTRIBUTED_FAILURE,
    DISTRIBUTED_NEEDLES,
    KERNEL_LIBRARIES,
    PACKAGE_ABSENT,
    TOKENIZER_FAULT,
    names_argument,
    names_no_argument_nor_fallback,
    states_without_fallback,
)
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

_REJECTION = (
    r"^(?:[\w.]+\.)?(?:ValueError|ValidationError|AssertionError|TypeError|ArgumentError|ArgumentTypeError"
    r"|ConfigError|InvalidArgument\w*)\b|(?:^|\s)Value error, |(?i:\binvalid\b|\bmust (?:be|not)\b|\bshould be\b"
    r"|\bexceeds?\b|\bis (?:smaller|larger|greater|less|bigger|lower|higher) than\b|\bout of range\b"
    r"|\bcannot be (?:larger|greater|smaller|less|negative|zero|more|bigger)\b)"
)

WORDED: tuple[Signature, ...] = (
    # Above a failed JIT build (75): a build that fails because the architecture lacks a type or instruction states
    # its cause in the architecture's words (`type fp8e4nv not supported in this architecture` under Triton's
    # `CompilationError: at 1:0:`), and that line is the root (taxonomy.md lets either category stand). A compiler
    # that does not know the target (`nvcc fatal : Unsupported gpu architecture 'compute_120a'`, a toolchain older
    # than the GPU) is no refusal of the architecture: that line stays part of the failed build.
    sig("arch_refusal", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 76,
        rf"^(?!.*\b(?:nvcc|ptxas) fatal\b).*?(?:{ARCH_REFUSAL.pattern})",
        ("support", "Support", "SUPPORT", "requir", "Requir", "only", "Only", "implement", "compiled", "built", "need",
         "backend", "efus",
         "available", "kernel", "inimum", "nknown", "nrecogni", "must", "ispatch", "peciali"),
        example="RuntimeError: Assertion error (csrc/apis/attention.hpp:211): Unsupported architecture"),
    sig("kernel_library_undefined", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 62,
        rf"^(?:[\w.]+\.)?NameError: name '{KERNEL_LIBRARIES}' is not defined", "NameError",
        example="NameError: name 'deep_gemm' is not defined"),
    sig("op_namespace_missing", C.IMPORT_ERROR, 70,
        rf"(?:_OpNamespace|torch\.ops\.\w+|module '[\w.]*\b(?:_C|_ops|ops|_kernels?|common_ops)\w*'"
        rf"|module '{KERNEL_LIBRARIES}(?:\.\w+)*')"
        r".{0,80}has no attribute",
        "has no attribute", phase=P.IMPORT,
        example="AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute 'fused_add_rmsnorm'"),
    # (A kernel library's own module lacking a function, `module 'sgl_kernel' has no attribute 'allreduce'`, is the
    # same mismatch: a build of the library for another version or platform than its caller.)
    sig("extension_load_failed", C.IMPORT_ERROR, 72,
        r"(?i:failed to (?:import|load)|could not (?:import|load)).{0,160}(?:undefined symbol|symbol not found"
        r"|cannot open shared object|DLL load failed|version `[^`']+' not found)", ("ailed to", "ould not"),
        phase=P.IMPORT, any_level=True,
        example="WARNING 05-30 10:51:41 [_custom_ops.py:21] Failed to import from vllm._C with ImportError(\"dlopen("
        "/x/vllm/_C.abi3.so, 0x0002): symbol not found in flat namespace '___kmpc_dispatch_deinit'\")"),
    sig("config_validation", C.INVALID_ARGUMENT, 52, r"(?:^|\s)Value error, \S", "Value error, ",
        phase=P.ARG_PARSE, any_level=True,
        example="Value error, max_model_len (40960) is greater than the derived max_model_len (32768). "
        "[type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]"),
    # A validation error whose message refuses a combination says more than its carrier: the engine does not support
    # what was asked together (or for this model), so the refusal decides, as it would outside pydantic.
    sig("config_refusal", C.UNSUPPORTED_CONFIG, 54,
        r"(?:^|\s)Value error, .{0,200}?(?i:\b(?:is|are) not (?:yet )?supported\b|\bdoes(?: not|n't) (?:yet )?support\b"
        r"|\bunsupported\b|\bnot (?:yet )?supported (?:for|with|by|when|on|in)\b|\bcannot be (?:used|combined|enabled) "
        r"(?:together )?with\b|\b(?:is|are) (?:not compatible|incompatible) with\b)",
        "Value error, ", phase=P.ARG_PARSE, any_level=True,
        example="Value error, Model Runner V2 does not yet support: ngram/ngram_gpu speculative decoding "
        "[type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]"),
    sig("validation_error_header", C.INVALID_ARGUMENT, 46, r"ValidationError: \d+ validation errors? for \w",
        "ValidationError", phase=P.ARG_PARSE, any_level=True,
        example="pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"),
    sig("argument_value", C.INVALID_ARGUMENT, 48, _REJECTION,
        ("Error", "error", "nvalid", "must", "should", "xceed", "than", "range", "cannot"),
        phase=P.ARG_PARSE, vocabulary=names_argument,
        example="ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768)."),
    sig("not_a_choice", C.INVALID_ARGUMENT, 50,
        r"(?i)\b(?:unknown|unsupported|invalid|unrecognized)\b.{0,80}\b(?:must|should) be one of\b",
        ("ust be one of", "hould be one of"), phase=P.ARG_PARSE,
        example="ValueError: Unknown quantization method: gptq. Must be one of ['awq', 'squeezellm']."),
    sig("negative_scheduler_limit", C.INVALID_ARGUMENT, 50,
        r"\b(?:max_num_\w+|max_model_len|max_\w+_len|\w+_batched_tokens)\b (?:is|was) (?:set to )?-\d",
        tuple(f"_{n} {v} -" for n in ("tokens", "len", "seqs") for v in ("is", "was", "is set to", "was set to")),
        phase=P.ARG_PARSE,
        example="max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled"),
    sig("distributed_failure", C.NCCL_ERROR, 62, DISTRIBUTED_FAILURE.pattern,
        DISTRIBUTED_NEEDLES, any_level=True,
        example="RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error / connectFullMesh "
        "failed"),
    # The KV transfer engine of prefill/decode disaggregation (Mooncake, NIXL, Ascend's) moves the cache between
    # servers over RDMA: one that does not start is the distributed runtime failing, like a rendezvous that fails.
    sig("kv_transfer_engine_init", C.NCCL_ERROR, 62,
        r"(?i:\b(?:mooncake|nixl|(?:kv[ _-]?)?transfer[ _-]?engine)\b.{0,80}\b(?:initiali[sz]ation|init|start(?:up)?)\b"
        r".{0,20}\b(?:failed|error)\b)",
        ("ooncake", "OONCAKE", "ixl", "IXL", "ransfer", "RANSFER"), phase=P.MODEL_LOAD,
        example="RuntimeError: Ascend Transfer Engine initialization failed."),
    # An RDMA work request that completed in error (ibverbs' completion statuses: the transport retry counter
    # exceeded, a local protection or remote access error, a flushed request), as a KV transfer engine or a
    # communicator logs it: the network between the servers failed under the distributed runtime.
    sig("rdma_completion_error", C.NCCL_ERROR, 64,
        r"(?i:\b(?:transport|RNR) retry counter exceeded|\blocal protection error\b|\bremote access error\b"
        r"|\bwork request flushed error\b)|\bIBV_WC_(?!SUCCESS)[A-Z_]+_ERR\b",
        ("retry counter exceeded", "protection error", "access error", "lushed error", "IBV_WC_"),
        example="E0101 00:00:00.000001  100 worker_pool.cpp:290] Worker: Process failed for slice (opcode: 1, "
        "local_nic: mlx5_0, peer_nic: 10.0.0.2:15000@mlx5_0, retry_cnt: 0): transport retry counter exceeded"),
    # NCCL's allocation of device memory failing (`Failed to CUDA malloc 1073741824 bytes`): the GPU is out of memory.
    sig("nccl_device_alloc_failed", C.CUDA_OOM, 81, r"NCCL WARN .{0,80}Failed to CUDA (?:malloc|calloc)", "NCCL WARN",
        any_level=True,
        example="node1:1234:5678 [0] include/alloc.h:120 NCCL WARN Failed to CUDA malloc 1073741824 bytes"),
    # A cache the memory left over does not hold: the KV cache, a hybrid model's mamba/state cache, a sliding-window
    # pool (vocabulary.CACHE_SHORTAGE), whichever server says so and in whichever order.
    sig("cache_shortage", C.KV_CACHE_TOO_SMALL, 70, CACHE_SHORTAGE.pattern,
        ("cache", "Cache", "CACHE", "pool", "ncrease", "aise"), phase=P.MEMORY_ALLOC,
        vocabulary=states_without_fallback,
        example="AssertionError: Not enough space for mamba cache, try to increase --mamba-full-memory-ratio."),
    # A value a flag must take stated against the flag (`UNO requires --speculative-eagle-topk to be at least 1`):
    # the value is wrong, not the combination.
    sig("argument_range", C.INVALID_ARGUMENT, 56,
        r"(?i:\b(?:requires?|expects?|needs?) `?--?[\w-]+`? to be (?:at (?:least|most)|positive|non-?negative"
        r"|greater|less|smaller|larger|between|within|one of|set to|an? (?:integer|int|float|string|list|dict)))",
        ("equire", "xpect", "eed"), phase=P.ARG_PARSE,
        example="ValueError: UNO requires --speculative-eagle-topk to be at least 1, got 0."),
    # The tokenizer or chat template named beside what is wrong with it (vocabulary.TOKENIZER_FAULT), unless the message
    # names a server argument (`--tokenizer-mode must be one of`): then the argument rows decide. This row and the
    # other vocabulary rows below leave alone a notice that goes on to say what the server does instead (`; using
    # eos_token as pad_token`): a fallback survived, not a failure.
    sig("tokenizer_fault", C.TOKENIZER_OR_TEMPLATE_ERROR, 58, TOKENIZER_FAULT.pattern,
        ("okeni", "OKENI", "emplate", "EMPLATE", "pecial token"), phase=P.MODEL_LOAD,
        vocabulary=names_no_argument_nor_fallback,
        example="ValueError: tokenizer does not define required token <|image_pad|>"),
    # A checkpoint named beside what is wrong with it (vocabulary.CHECKPOINT_FAULT).
    sig("checkpoint_fault", C.WEIGHTS_LOAD_ERROR, 57, CHECKPOINT_FAULT.pattern,
        CHECKPOINT_NEEDLES, phase=P.MODEL_LOAD,
        vocabulary=states_without_fallback,
        example="RuntimeError: No model weights found in: `/data/models/glm-4.6`"),
    # A package named as absent, with the advice to install it (vocabulary.PACKAGE_ABSENT).
    sig("package_absent", C.IMPORT_ERROR, 58, PACKAGE_ABSENT.pattern, ("nstall", "NSTALL", "pgrade", "PGRADE"),
        phase=P.IMPORT,
        vocabulary=states_without_fallback,
        example="RuntimeError: cuda.bindings is not available. Install it with: pip install cuda-python"),
    # Something waited for that never came: `timed out waiting for clients`, a store or a peer that did not answer, a
    # watchdog stuck behind a hung call. Said of the distributed runtime too, it is a timeout (the runtime raised no
    # error of its own). The engines' handshake has its own row, which knows its phase.
    sig("timed_out_waiting", C.HANG_OR_TIMEOUT, 63,
        r"(?i:\btimed? ?out (?:after [\d.]+ ?\w+ )?(?:while )?waiting (?:for|on)\b(?! (?:the )?(?:new )?engine))"
        r"|(?i:\bwatchdog got stuck\b)",
        ("imed out", "IMED OUT", "ime out", "Timeout waiting", "watchdog got stuck"), any_level=True,
        example="torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
        "joined."),
    # A deadline that passed, in any wording: a step that did not happen within its time (`failed to report ZMQ
    # addresses within timeout=30 seconds`, `did not return within 120s`), or was still not ready after waiting.
    sig("deadline_passed", C.HANG_OR_TIMEOUT, 56,
        r"(?i:\b(?:did not|didn't|failed to|could not|couldn't|cannot|can't|never|unable to|not)\b.{0,120}?\bwithin "
        r"(?:the )?(?:timeout\b|\w*timeout\w*\W|[\d.]+ ?(?:s|ms|secs?|seconds?|m|mins?|minutes?|h|hours?)\b)"
        r"|\bnot ready after waiting\b)",
        ("within", "Within", "WITHIN", "after waiting"), any_level=True,
        example="RuntimeError: DP Coordinator process failed to report ZMQ addresses within timeout=30 seconds during "
        "startup."),
    # A setting that needs another (`AuxOutput Connector requires prefix caching`, `dp_shared_memory requires
    # cpu_offload=True`), raised as the rejection of a value: a combination the engine does not support. Above a plain
    # rejection raised in argument code (families.ARGS_FRAMES), below every row that names a cause.
    sig("config_requirement", C.UNSUPPORTED_CONFIG, 47,
        r"^(?:[\w.]+\.)?(?:ValueError|AssertionError|NotImplementedError): [^:]{1,80}?\brequires (?!installation\b)",
        "Error", phase=P.ARG_PARSE, example="ValueError: AuxOutput Connector requires prefix caching."),
    # Launch settings given through the environment that contradict each other or are malformed
    # (`Inconsistent GPU visibility env vars: HIP_VISIBLE_DEVICES='0,1' vs CUDA_VISIBLE_DEVICES='2,3'`): a setting is
    # wrong, as a flag would be.
    sig("environment_setting", C.INVALID_ARGUMENT, 50,
        r"(?i:\b(?:inconsistent|conflicting|invalid|malformed|unparseable)\b.{0,60}\benv(?:ironment)?(?: var\w*)?\b)"
        r"|(?i:\b(?:inconsistent|conflicting|invalid|malformed)\b).{0,60}\b[A-Z][A-Z0-9]*_[A-Z0-9_]+=",
        ("nconsistent", "onflicting", "nvalid", "alformed", "nparseable"), phase=P.ARG_PARSE,
        example="ValueError: Inconsistent GPU visibility env vars: HIP_VISIBLE_DEVICES='0,1' vs "
        "CUDA_VISIBLE_DEVICES='2,3'. Please set only one, or ensure they match."),
    sig("c10d_wait_timeout", C.HANG_OR_TIMEOUT, 66,
        r"waitForInput.{0,200}(?i:tim(?:ed? ?out|eout))|\bSocket Timeout\b", ("waitForInput", "Socket Timeout"),
        any_level=True,
        example="[E socket.cpp:1013] [c10d] waitForInput: poll for socket returned 0, likely a timeout"),
    # A refused connection alone is one try NCCL repeats; the retries running out (`exceeded error retry count`) fail.
    sig("nccl_warn_failure", C.NCCL_ERROR, 76,
        r"NCCL WARN .{0,200}(?:(?i:cuda failure)|[Uu]nhandled|nccl\w+Error|\bibv_\w+ failed|NET/\w+ ?: .{0,80}"
        r"(?:error|failed)|Call to \w+ failed|[Bb]ootstrap.{0,60}failed|[Ee]rror while|No route to host"
        r"|[Nn]etwork is unreachable|[Ff]ailed to (?!CUDA (?:malloc|calloc))|\b[Nn]o \w+ (?:interface|device)s? found"
        r"|Minimum requirement is|with status=[1-9]|vendor err|[Uu]nable to|exceeded .{0,40}retr"
        r"|already checked in|[Aa]ttempt to use|[Mm]ismatch)",
        "NCCL WARN", any_level=True,
        example="node1:1234:5678 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'invalid device function'"),
    sig("cuda_error_unnamed", C.UNKNOWN, 25,
        r"(?:CU|HIP)BLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR)|(?:CUDA|HIP) error: (?:unspecified launch failure"
        r"|unknown error)|(?:cuda|hip)ErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED",
        ("BLAS_STATUS_", "CUDA error: ", "HIP error: ", "ErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"),
        example="RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`"),
    sig("weights_incomplete", C.WEIGHTS_LOAD_ERROR, 55,
        r"(?i:(?:didn't|did not|could not|couldn't|failed to) finish (?:the )?(?:model |weights? )?load(?:ing)?)"
        r"|\b(?:param(?:_data)?|loaded_weight)\.shape\b.{0,40}(?:!=|==|,|torch\.Size|mismatch)",
        ("finish", ".shape"), phase=P.MODEL_LOAD,
        example="ValueError: TP rank 1 could finish the model loading, but there are other ranks that didn't finish "
        "loading."),
    # A file of a JIT cache that is missing, locked or unwritable (Triton's `~/.triton/cache`, torch extensions',
    # Inductor's, FlashInfer's and DeepGEMM's caches): kernels built just in time cannot be stored or found again,
    # often two ranks racing on one cache; the build's problem, whatever error the file system raised.
    sig("jit_cache_file", C.KERNEL_JIT_ERROR, 64,
        r"(?i:\bno such file\b|\bpermission denied\b|\bfile exists\b|\bread-only file system\b|\bdisk quota\b"
        r"|\bno space left\b|\bstale file handle\b|\bresource busy\b|\bErrno \d+\b).{0,200}?"
        r"(?:\.triton[/\\]cache|torch_extensions|torchinductor_\w+|torch_compile_cache|(?:\.cache|\.local)[/\\]"
        r"(?:flashinfer|deep_?gemm|tvm-ffi)[/\\])",
        ("triton", "torch_extensions", "torchinductor", "torch_compile_cache", "flashinfer", "deep_gemm", "deepgemm",
         "tvm-ffi"),
        any_level=True,
        example="FileNotFoundError: [Errno 2] No such file or directory: '/root/.triton/cache/a95dd98/_fwd_kernel."
        "json.tmp.pid_33358_98246'"),
    sig("jit_source_assertion", C.KERNEL_JIT_ERROR, 60,
        r"(?i:assert\w*(?: error| failed)?):?\s*\([^()]*[/\\]jit[/\\][^()]*:\d+\)", ("ssert",),
        example="RuntimeError: Assertion error (/src/deepgemm/csrc/jit/compiler.hpp:50): not root_path.empty()"),
)
