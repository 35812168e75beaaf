"""Signature rows about the launch configuration: a flag or value that is wrong (invalid_argument) and settings the
engine does not support together or for this model (unsupported_config). Part of the signature table (see
signatures.py for the specificity bands and how the modules make one table).
"""

from __future__ import annotations

from orchestrator.knowledge.families import ARGS_FRAMES, BAD_INPUT_TYPES
from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.vocabulary import names_argument, names_no_socket_errno
from orchestrator.model import Category as C
from orchestrator.model import Phase as P

_REJECTION = (
    r"^(?:[\w.]+\.)?(?:ValueError|ValidationError|AssertionError|TypeError|ArgumentError|ArgumentTypeError"
    r"|ConfigError|InvalidArgument\w*)\b|(?:^|\s)Value error, |(?i:\binvalid\b|\bmust (?:be|not)\b|\bshould be\b"
    r"|\bexceeds?\b|\bis (?:smaller|larger|greater|less|bigger|lower|higher) than\b|\bout of range\b"
    r"|\bcannot be (?:larger|greater|smaller|less|negative|zero|more|bigger)\b)"
)
"""How a value's rejection is worded (an argument row also needs the message to name a server argument)."""

CONFIG_ROWS: tuple[Signature, ...] = (
    # invalid_argument: a flag or value that is wrong by itself, or against the model's own limits.
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
    # A parallel world larger than the devices there are: vLLM's `The number of required GPUs exceeds the total
    # number of available GPUs in the placement group` (raised for a Ray placement group given to it, logged as a
    # warning before it waits on one it creates) and `World size (4) is larger than the number of available GPUs (1)
    # in this node`. The parallel sizes are wrong for this machine or cluster: valid alone, not for the GPU count
    # (taxonomy.md).
    sig("parallel_size_exceeds_devices", C.INVALID_ARGUMENT, 58,
        r"(?i:\b(?:required|requested) (?:number of )?(?:GPU|NPU|TPU|XPU|HPU|device)s? exceeds? the (?:total )?"
        r"number of (?:available )?(?:GPU|NPU|TPU|XPU|HPU|device)s?\b)"
        r"|\bWorld size \(\d+\) is (?:larger|greater) than the number of available (?:GPU|NPU|XPU|HPU|device)s\b",
        ("xceed", "XCEED", "World size"), in_warnings=True,
        example="WARNING 05-26 18:53:53 [ray_utils.py:342] The number of required GPUs exceeds the total number of "
        "available GPUs in the placement group."),
    sig("exception_in_arg_parsing", C.INVALID_ARGUMENT, 45, rf"^(?:[\w.]+\.)?{BAD_INPUT_TYPES}\b",
        "Error", phase=P.ARG_PARSE, context="(?m)" + ARGS_FRAMES,
        example="IndexError: list index out of range"),
    sig("config_validation", C.INVALID_ARGUMENT, 52, r"(?:^|\s)Value error, \S", "Value error, ",
        phase=P.ARG_PARSE, any_level=True,
        example="Value error, max_model_len (40960) is greater than the derived max_model_len (32768). "
        "[type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]"),
    sig("validation_error_header", C.INVALID_ARGUMENT, 46, r"ValidationError: \d+ validation errors? for \w",
        "ValidationError", phase=P.ARG_PARSE, any_level=True,
        example="pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"),
    sig("argument_value", C.INVALID_ARGUMENT, 48, _REJECTION,
        ("Error", "error", "nvalid", "must", "should", "xceed", "than", "range", "cannot"),
        phase=P.ARG_PARSE, vocabulary=names_argument,
        example="ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768)."),
    # A value refused with the list of the accepted ones (`Must be one of [...]`, vLLM's `invalid tool call parser: x
    # (chose from { ... })` for its tool-call and reasoning parsers, argparse's `(choose from ...)`).
    sig("not_a_choice", C.INVALID_ARGUMENT, 50,
        r"(?i)\b(?:unknown|unsupported|invalid|unrecognized)\b.{0,80}\b(?:must|should) be one of\b"
        r"|(?i:\b(?:unknown|unsupported|invalid|unrecognized)\b.{0,120}\((?:choose|chose) from\b)",
        ("ust be one of", "hould be one of", "hoose from", "hose from"), phase=P.ARG_PARSE,
        example="ValueError: Unknown quantization method: gptq. Must be one of ['awq', 'squeezellm']."),
    sig("negative_scheduler_limit", C.INVALID_ARGUMENT, 50,
        r"\b(?:max_num_\w+|max_model_len|max_\w+_len|\w+_batched_tokens)\b (?:is|was) (?:set to )?-\d",
        tuple(f"_{n} {v} -" for n in ("tokens", "len", "seqs") for v in ("is", "was", "is set to", "was set to")),
        phase=P.ARG_PARSE,
        example="max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled"),
    # A value a flag must take stated against the flag (`UNO requires --speculative-eagle-topk to be at least 1`):
    # the value is wrong, not the combination.
    sig("argument_range", C.INVALID_ARGUMENT, 56,
        r"(?i:\b(?:requires?|expects?|needs?) `?--?[\w-]+`? to be (?:at (?:least|most)|positive|non-?negative"
        r"|greater|less|smaller|larger|between|within|one of|set to|an? (?:integer|int|float|string|list|dict)))",
        ("equire", "xpect", "eed"), phase=P.ARG_PARSE,
        example="ValueError: UNO requires --speculative-eagle-topk to be at least 1, got 0."),
    # An exception whose way out is to drop a flag or to give another one explicitly (`NUMA binding was requested, but
    # vLLM could not detect the GPU-to-NUMA topology automatically. Pass --numa-bind-nodes explicitly or disable
    # --numa-bind.`): the flag, as given, cannot be honoured here. Only a flag the tool knows; a row that names the
    # cause (memory, the architecture, a missing package) says more and outranks it.
    sig("flag_to_drop", C.INVALID_ARGUMENT, 48,
        r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): .{0,300}?(?i:\b(?:disable|remove|drop|unset|omit)\s+`?--[a-z]"
        r"|\b(?:pass|set|specify|provide)\s+`?--[a-z][\w-]*`?\s+explicitly\b)",
        ("Error", "Exception"), phase=P.ARG_PARSE, vocabulary=names_argument,
        example="RuntimeError: NUMA binding was requested, but vLLM could not detect the GPU-to-NUMA topology "
        "automatically. Pass --numa-bind-nodes explicitly or disable --numa-bind."),
    # Launch settings given through the environment that contradict each other or are malformed
    # (`Inconsistent GPU visibility env vars: HIP_VISIBLE_DEVICES='0,1' vs CUDA_VISIBLE_DEVICES='2,3'`): a setting is
    # wrong, as a flag would be.
    sig("environment_setting", C.INVALID_ARGUMENT, 50,
        r"(?i:\b(?:inconsistent|conflicting|invalid|malformed|unparseable)\b.{0,60}\benv(?:ironment)?(?: var\w*)?\b)"
        r"|(?i:\b(?:inconsistent|conflicting|invalid|malformed)\b).{0,60}\b[A-Z][A-Z0-9]*_[A-Z0-9_]+=",
        ("nconsistent", "onflicting", "nvalid", "alformed", "nparseable"), phase=P.ARG_PARSE,
        example="ValueError: Inconsistent GPU visibility env vars: HIP_VISIBLE_DEVICES='0,1' vs "
        "CUDA_VISIBLE_DEVICES='2,3'. Please set only one, or ensure they match."),
    # vLLM's check of the model argument: neither a hub repository id nor a local directory with a config.
    sig("model_reference_invalid", C.INVALID_ARGUMENT, 58,
        r"Invalid repository ID or local directory specified",
        "Invalid repository ID", phase=P.ARG_PARSE,
        example="ValueError: Invalid repository ID or local directory specified: 'some-model-without-org'."),
    # unsupported_config: valid settings the engine does not support together, or for this model.
    # A quantization the engine refuses for this model or with these flags; refused for this GPU (`for the current
    # GPU. Minimum capability: 90`), it is the architecture's, told by the rows of rows_kernels.py.
    sig("quantization_not_supported", C.UNSUPPORTED_CONFIG, 82,
        r"(?i:quantization (?:method|scheme|type) \S+ (?:is )?not supported)(?! for (?:the current|this|your) "
        r"(?:GPU|device|platform))",
        ("quantization", "Quantization"), phase=P.MODEL_LOAD,
        example="ValueError: Quantization scheme fp8 is not supported for this model."),
    # A backend named after the word (`backend FLASH_ATTN is not supported`); one named before it and not available
    # (`DeepGEMM backend is not available ... Please install`) is a package that is absent, told by the import rows.
    sig("invalid_backend", C.UNSUPPORTED_CONFIG, 60,
        r"Invalid attention backend"
        r"|(?i:(?:attention )?backend (?!(?:is|was|are)\b)\S+ (?:is )?not (?:supported|available))"
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
        ("support", "Support"), vocabulary=names_no_socket_errno,
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
        ("nsupported", "NSUPPORTED", "supported", "implemented", "ot support"), vocabulary=names_no_socket_errno,
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
    # A validation error whose message refuses a combination says more than its carrier: the engine does not support
    # what was asked together (or for this model), so the refusal decides, as it would outside pydantic.
    sig("config_refusal", C.UNSUPPORTED_CONFIG, 54,
        r"(?:^|\s)Value error, .{0,200}?(?i:\b(?:is|are) not (?:yet )?supported\b|\bdoes(?: not|n't) (?:yet )?support\b"
        r"|\bunsupported\b|\bnot (?:yet )?supported (?:for|with|by|when|on|in)\b|\bcannot be (?:used|combined|enabled) "
        r"(?:together )?with\b|\b(?:is|are) (?:not compatible|incompatible) with\b)",
        "Value error, ", phase=P.ARG_PARSE, any_level=True,
        example="Value error, Model Runner V2 does not yet support: ngram/ngram_gpu speculative decoding "
        "[type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]"),
    # A setting that needs another (`AuxOutput Connector requires prefix caching`, `dp_shared_memory requires
    # cpu_offload=True`), raised as the rejection of a value: a combination the engine does not support. Above a plain
    # rejection raised in argument code (families.ARGS_FRAMES), below every row that names a cause.
    sig("config_requirement", C.UNSUPPORTED_CONFIG, 47,
        r"^(?:[\w.]+\.)?(?:ValueError|AssertionError|NotImplementedError): [^:]{1,80}?\brequires (?!installation\b)",
        "Error", phase=P.ARG_PARSE, example="ValueError: AuxOutput Connector requires prefix caching."),
    # An exception telling the user to switch to another backend for what the model or flags need (vLLM's `Please use
    # Flashinfer backend for models with logits_soft_cap`, `Please use FlashInfer backend for DCP`): this backend does
    # not support the combination. Only raised: the same advice logged as a warning is a slower fallback, not a failure.
    sig("use_other_backend", C.UNSUPPORTED_CONFIG, 58,
        r"^(?:[\w.]+\.)?(?:ValueError|RuntimeError|AssertionError|NotImplementedError): .{0,200}?"
        r"\b[Pp]lease (?:use|switch to|select|choose) (?:the |an? |another )?[\w-]+ (?:attention )?backend\b",
        "lease ",
        example="ValueError: Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). Otherwise, "
        "the output might be wrong."),
)
