"""Signature rows about kernels: none for this GPU's architecture (kernel_not_supported_on_arch), or a build just in
time that failed (kernel_jit_error: Triton, nvcc/ptxas, ninja, a compiler or linker run as a subprocess, a JIT cache).
Part of the signature table (see signatures.py for the specificity bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import (
    ARCH,
    ARCH_ID,
    ARCH_REFUSAL,
    CUDA_CODE_END,
    CUDA_RESULT,
    CUDA_RESULT_NEEDLES,
    KERNEL_LIBRARIES,
)
from orchestrator.model import Category as C

KERNEL_ROWS: tuple[Signature, ...] = (
    # kernel_not_supported_on_arch: no kernel, or no kernel configuration, for this GPU's architecture.
    # No kernel built for this GPU, or a kernel image the device rejects as invalid (a cubin built for another
    # architecture, loaded by a JIT cache or a prebuilt wheel).
    sig("no_kernel_image", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 80,
        r"no kernel image is available for execution|NoKernelImageForDevice"
        r"|(?:CUDA|HIP) error: invalid device function|(?:cuda|hip)ErrorInvalidDeviceFunction|hipErrorNoBinaryForGpu"
        r"|No compatible code objects? found|CUDA_ERROR_INVALID_IMAGE|device kernel image is invalid"
        r"|cudaErrorInvalidKernelImage|hipErrorInvalidImage",
        ("kernel image", "NoKernelImage", "invalid device function", "InvalidDeviceFunction",
         "NoBinaryForGpu", "compatible code object", "INVALID_IMAGE", "InvalidKernelImage", "InvalidImage"),
        example="torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device"),
    sig("arch_required", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 80,
        rf"(?i)\b(?:only supports?|requires?|only (?:be )?(?:supported|available|works?) (?:on|for|with))\s+"
        rf"(?:an?\s+|the\s+)?(?:NVIDIA\s+)?{ARCH}"
        rf"|\bnot supported on (?:this |the current )?(?:GPU|device|arch\w*)|\b{ARCH} is not supported"
        r"|\bdoes(?: not|n't) support\b.{0,80}\bon (?:this|the current|your) (?:GPU|device)\b"
        r"|compute capability (?:of )?(?:at least|>=?|below|lower than)"
        rf"|(?i:unsupported (?:gpu |arch\w* |compute capability|device capability)(?!\w* ?'compute_)"
        rf"|not (?:compiled|built) for (?:this|the "
        rf"current|your) (?:gpu|arch\w*|device))|{ARCH} (?:is |are )?not (?:yet )?supported",
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
    # Above a failed JIT build (75): a build that fails because the architecture lacks a type or instruction states
    # its cause in the architecture's words (`type fp8e4nv not supported in this architecture` under Triton's
    # `CompilationError: at 1:0:`), and that line is the root (taxonomy.md lets either category stand). A compiler
    # that does not know the target (`nvcc fatal : Unsupported gpu architecture 'compute_120a'`, a toolchain older
    # than the GPU) is no refusal of the architecture: that line stays part of the failed build. Nor is a library that
    # could not find out the capability (FlashInfer's warning `Failed to get device capability: <why>`): it goes on with
    # a default, and what fails later says so itself.
    sig("arch_refusal", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 76,
        rf"^(?!.*\b(?:nvcc|ptxas) fatal\b)"
        r"(?!.*\b(?i:failed to|could not|couldn't|unable to) (?:get|query|detect|determine|read) (?:the )?"
        r"(?i:device|compute|cuda|gpu) capabilit)"
        rf".*?(?:{ARCH_REFUSAL.pattern})",
        ("support", "Support", "SUPPORT", "requir", "Requir", "only", "Only", "implement", "compiled", "built", "need",
         "backend", "efus",
         "available", "kernel", "inimum", "nknown", "nrecogni", "must", "ispatch", "peciali"),
        example="RuntimeError: Assertion error (csrc/apis/attention.hpp:211): Unsupported architecture"),
    sig("kernel_library_undefined", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 62,
        rf"^(?:[\w.]+\.)?NameError: name '{KERNEL_LIBRARIES}' is not defined", "NameError",
        example="NameError: name 'deep_gemm' is not defined"),
    # A table keyed by the GPU's architecture that lacks this one (a kernel library's dispatch by `sm_100a`, a chip-info
    # table by `gfx` id): the library has nothing for this GPU, whatever code looked it up.
    sig("arch_key_missing", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 62, rf"^(?:[\w.]+\.)?KeyError: ['\"]{ARCH_ID}['\"]",
        "KeyError", example="KeyError: 'sm_121a'"),
    # DeepGEMM's host code picks a recipe and a scale-factor layout by the GPU's major architecture (9, 10, later 12)
    # and falls through to `DG_HOST_UNREACHABLE("Unknown recipe")` / `("Unknown SF transformation")` on any other: the
    # library has no path for this GPU, whichever kernel asked.
    sig("kernel_dispatch_fell_through", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 70,
        r"Assertion error \([^()]*\): Unknown (?:recipe|SF transformation|kernel or architecture)\b",
        ("Unknown recipe", "Unknown SF transformation", "Unknown kernel or architecture"),
        example="RuntimeError: Assertion error (csrc/apis/../utils/layout.hpp:52): Unknown recipe"),
    sig("cuda_result_no_kernel_image", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 78,
        rf"{CUDA_RESULT}209{CUDA_CODE_END}|\bCUDA_ERROR_NO_BINARY_FOR_GPU\b",
        (*CUDA_RESULT_NEEDLES, "CUDA_ERROR_NO_BINARY_FOR_GPU"), any_level=True,
        example="cuModuleLoadData failed with error 209"),
    # Ascend's operator store has no kernel of this operator for this chip (CANN's `EZ####` operator errors, `Optype
    # [X] of Ops kernel [AIcoreEngine] is unsupported`): no kernel for this device, as CUDA's `no kernel image`.
    sig("npu_operator_unsupported", C.KERNEL_NOT_SUPPORTED_ON_ARCH, 72,
        r"\bOps? kernel \[\w+\] is (?:unsupported|not supported)|(?:^|[\s:\]])EZ\d{4}:.{0,240}?\b(?:is unsupported"
        r"|is not supported|not support\w*)\b",
        ("kernel [", "EZ"), any_level=True,
        example="EZ3002: [PID: 603] 2025-06-23-10:51:59.636.525 Optype [TransData] of Ops kernel [AIcoreEngine] is "
        "unsupported. Reason: [tbe-custom]:op type TransData is not found in this op store."),
    # kernel_jit_error: kernels built just in time (FlashInfer, DeepGEMM, Triton, torch extensions) whose build failed.
    sig("jit_build_failed", C.KERNEL_JIT_ERROR, 75,
        r"(?i)ninja build failed|ninja: build stopped|Ninja is required to load C\+\+ extensions"
        r"|No such file or directory: '?ninja|Error building extension|CalledProcessError: Command .{0,40}ninja"
        r"|nvcc fatal|ptxas (?:fatal|error)|\.cuh?\(\d+\): error|nvrtc: error|NVRTC_ERROR"
        r"|fatal error: \S+\.(?:h|hpp|cuh): No such file|triton\.compiler\.errors\.\w+|CompilationError"
        r"|\bjit\b.{0,60}\b(?:compil\w*|build)\b.{0,30}\b(?:failed|error)|failed to (?:jit[- ])?compile"
        r"|LLVM ERROR|error: identifier .{1,80} is undefined|\bcicc\b"
        r"|(?i:(?:cuda|kernel|cubin|ptx) compilation (?:failed|error))|error: command '.{0,120}(?:nvcc|gcc|g\+\+|c\+\+"
        r"|clang\S*)' failed|PassManager::run failed|(?i:error (?:while |when )?(?:compiling|building) (?:the )?"
        r"(?:kernel|extension|module|cubin))|(?i:(?:cute|cutlass)[ _-]?dsl.{0,80}(?:error|failed))|\bMLIRError\b",
        ("inja", "Error building extension", "nvcc", "ptxas", "): error", "nvrtc", "NVRTC", "fatal error:",
         "triton.compiler", "CompilationError", "JIT", "jit", "compile", "LLVM ERROR", "is undefined", "cicc",
         "ompilation", "error: command", "PassManager", "ompiling", "uilding", "DSL", "dsl", "MLIRError"),
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
    # A compiler's diagnostic in its own format (gcc/clang `file:line:col: error:`, nvcc's `file(line): error`) on a C,
    # C++ or CUDA source: the JIT build failed there, whatever log carries it and however it indents the build's output.
    # It outranks the build's summaries (`Ninja build failed`, a CalledProcessError for ninja or nvcc), which a JIT
    # library often raises before it prints the build's output; a path may hold any version tag (`0.0.0+unknown`).
    sig("compiler_diagnostic", C.KERNEL_JIT_ERROR, 77,
        r"(?:^|\s)[\w.\-+@~/\\]*\.(?:cuh?|cpp|cc|cxx|c|hpp|hh|h|inl|cu\.inc)(?:(?::\d+){1,2}|\(\d+\)):\s*(?:fatal )?"
        r"error\b",
        (": error", ": fatal error"), any_level=True,
        example="  activation.cuh:95:52: error: type/value mismatch at argument 1 in template parameter list"),
    # The linker of such a build (Triton links its launcher against libcuda with the system's compiler): a library it
    # cannot find or a symbol it cannot resolve fails the build. ld's own `cannot find -lcuda` has no literal the
    # prefilter anchors on; gcc's `collect2: error: ld returned 1 exit status` after it always does.
    sig("linker_error", C.KERNEL_JIT_ERROR, 74,
        r"(?:^|[\s/])ld(?:\.\w+)?: (?:cannot find -l\S+|error\b)|\bld returned [1-9]\d* exit status"
        r"|\bundefined reference to\b|\bcollect2: (?:fatal )?error\b",
        ("ld: cannot find", "ld: error", "ld returned", "undefined reference", "collect2"), any_level=True,
        example="collect2: error: ld returned 1 exit status"),
    # Intel Gaudi compiles each graph before it runs it: its graph compiler (GC) failing to load or build a TPC
    # kernel, and the Synapse API and PyTorch bridge reporting the compile that failed, are that build's failure.
    # The bridge glues its source line number to the message (`599Graph compile failed`), so no word boundary.
    sig("gaudi_graph_compile_failed", C.KERNEL_JIT_ERROR, 72,
        r"Failed to load tpc kernel\b|Graph compile failed\. synStatus|synGraphCompile: SYN_API_CALL failed"
        r"|compileGraph: Can not compile graph",
        ("tpc kernel", "Graph compile failed", "SYN_API_CALL failed", "Can not compile graph"), any_level=True,
        example="[19:08:34.164951][GC                    ][error][tid:44F8A] Failed to load tpc kernel for node: "
        "TPC12, GUID: cast_f32_to_bf16. Got error: GLUE_FAILED"),
)
