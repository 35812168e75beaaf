"""Families of failures told by the structure of a traceback, not by its message.

A message no signature names still has a shape: the exception's type, and the code it was raised in.
A `KeyError` raised in `load_weights`, an `AssertionError` in a `weight_loader`, anything raised in a
safetensors reader is a checkpoint that does not fit the model; anything raised while Triton, nvcc,
ninja or a CuTe DSL compiles is a JIT build; inside `torch.distributed` or a NCCL wrapper, a
distributed failure. One row a family; `frames` is searched in the innermost few frames (innermost
first), walking outwards only through frames of general-purpose code (torch, the standard library),
which raise on behalf of their caller; the first frame of other code ends the walk. Rows marked
`anywhere` search the whole stack.
Their specificities sit between the plain Python exception (20) and the signatures that name a cause
outright (60+), so a message that says more (CUDA out of memory inside `load_weights`) still wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from orchestrator.model import Category
from orchestrator.model import Category as C

INNERMOST_FRAMES = 4
"""How many of the innermost frames the walk looks at, at most."""

PASS_THROUGH = re.compile(
    r"[/\\]torch[/\\](?!distributed|utils[/\\]cpp_extension|_inductor)|[/\\]python3\.\d+[/\\](?!site-packages|dist-packages)"
    r"|<frozen |[/\\](?:functools|contextlib|threading|concurrent)[/\\.]|[/\\]_?tensor\.py\""
)
"""Frames of general-purpose code: an exception raised there is about what its caller asked for."""


@dataclass(frozen=True)
class Family:
    """A structural rule: an exception type and/or the code it was raised in mean a category."""

    id: str
    category: Category
    specificity: int
    exception: str | None = None
    """Matched against the exception's qualified type name (`safetensors_rust.SafetensorError`)."""
    frames: str | None = None
    """Matched against frame lines (`File "/x/weight_utils.py", line 3, in load`)."""
    anywhere: bool = False
    exception_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    frames_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "exception_regex", re.compile(self.exception) if self.exception else None)
        object.__setattr__(self, "frames_regex", re.compile(self.frames) if self.frames else None)

    def matches_type(self, exception_type: str | None) -> bool:
        """Whether the exception's type fits this row (any type when the row names none)."""
        if self.exception_regex is None:
            return True
        return exception_type is not None and self.exception_regex.search(exception_type) is not None


ARGS_FRAMES = (
    r"in (?:parse_args|prepare_server_args|parse_cli_args|from_cli_args|check_server_args|_pull_args\w*"
    r"|_handle_\w+|create_engine_config|_?verify_\w+|_?check_\w*args\w*)$|argparse\.py|arg_utils\.py"
    r"|server_args\.py\", line \d+, in |[/\\]vllm[/\\]config[/\\]\w+\.py\"|[/\\]arg_groups[/\\]\w+\.py\""
)
"""Frames of the code that checks server arguments (SGLang's ServerArgs, vLLM's EngineArgs and config checks)."""
BAD_INPUT_TYPES = r"(?:ValueError|IndexError|KeyError|TypeError|AssertionError|ArgumentError|ArgumentTypeError)"
"""The exceptions code raises on input it rejects (raised in the argument checks, an argument problem)."""
_BAD_INPUT = rf"(?:^|\.){BAD_INPUT_TYPES}$"

FAMILIES: tuple[Family, ...] = (
    # Exception types that name their family whatever raised them.
    Family("import_type", C.IMPORT_ERROR, 60, exception=r"(?:^|\.)(?:ModuleNotFoundError|ImportError)$"),
    Family("oom_type", C.CUDA_OOM, 75, exception=r"(?:^|\.)OutOfMemoryError$"),
    Family("safetensors_type", C.WEIGHTS_LOAD_ERROR, 62, exception=r"(?i)safetensor"),
    Family("template_type", C.TOKENIZER_OR_TEMPLATE_ERROR, 62, exception=r"^jinja2\.|Template\w*Error$"),
    Family("compile_type", C.KERNEL_JIT_ERROR, 62,
           exception=r"CompilationError$|CompileError$|BackendCompilerFailed$|(?:^|\.)DSL\w*Error$|NVRTC\w*Error$"
           r"|(?:^|\.)InductorError$"),
    Family("distributed_type", C.NCCL_ERROR, 62, exception=r"(?:^|\.)Dist(?:Backend|Network|Store)?Error$"),
    Family("timeout_type", C.HANG_OR_TIMEOUT, 40, exception=r"(?:^|\.)(?:TimeoutError|TimeoutExpired)$"),
    # The server's own warm-up request (the HTTP client's errors inside the warm-up loop).
    Family("warmup_request", C.WARMUP_REQUEST_FAILED, 50,
           frames=r"in (?:_wait_and_warmup|_execute_server_warmup|_send_warmup\w*|warmup_request\w*"
           r"|_run_server_warmup\w*|_wait_until_\w*ready\w*)$", anywhere=True),
    # Sampling from probabilities asserts on the device when they hold NaN/inf or sum to nothing: the cause, not
    # the assert (a more specific message, OOM or an illegal access, still outranks it).
    Family("sampling_assert", C.NAN_IN_PROBS, 73, exception=r"(?:^|\.)(?:AcceleratorError|RuntimeError)$",
           frames=r"in (?:_?multinomial\w*|\w*sampling_from_probs\w*|_sample_from_probs\w*|random_sample)$"),
    # Where it was raised.
    Family("args_code", C.INVALID_ARGUMENT, 45, exception=_BAD_INPUT,
           frames=ARGS_FRAMES),
    # (FusedMoE's loader writes each expert's w13/w2 shard in `_load_w13`/`_load_w2`, in vLLM and SGLang alike; their
    # parameter classes copy a shard in `load_row_parallel_weight`, `load_column_parallel_weight`, `load_qkv_weight`.)
    Family("weights_code", C.WEIGHTS_LOAD_ERROR, 50,
           frames=r"in (?:load_weights\w*|_load_weights\w*|weight_loader\w*|_weight_loader\w*|load_state_dict"
           r"|load_\w+_weight"
           r"|_load_w(?:13|2)|_load_module|load_checkpoint\w*|_load_\w*weight\w*|\w*weights_iterator|_prepare_weights"
           r"|download_weights\w*|load_sharded\w*)$|weight_utils\.py|safetensors[/\\]|model_loader[/\\]weight"),
    # Transformers' auto mappings have no entry for the checkpoint's model type (`KeyError: '<model_type>'` from
    # CONFIG_MAPPING): the installed Transformers does not know this model, which the engine cannot then serve.
    Family("model_type_unknown", C.UNSUPPORTED_CONFIG, 52, exception=r"(?:^|\.)KeyError$",
           frames=r"transformers[/\\]models[/\\]auto[/\\](?:configuration|modeling)_auto\.py"),
    Family("tokenizer_code", C.TOKENIZER_OR_TEMPLATE_ERROR, 50,
           frames=r"tokenization_\w+\.py|tokenization_utils|jinja2[/\\]|tiktoken|sentencepiece[/\\]"
           r"|in (?:get_tokenizer|get_processor|apply_chat_template|_load_chat_template|load_chat_template"
           r"|get_chat_template\w*|_apply_chat_template\w*|guess_chat_template\w*)$"),
    # A kernel built just in time; Triton's launcher (`backends/<gpu>/driver.py`) runs a kernel already built, and
    # what it raises is about the launch (its arguments, the device), not the build.
    Family("jit_code", C.KERNEL_JIT_ERROR, 50,
           frames=r"triton[/\\](?:compiler[/\\]|backends[/\\](?!\w+[/\\]driver\.py))"
           r"|torch[/\\]utils[/\\]cpp_extension\.py|[/\\]jit[/\\]"
           r"|_jit\.py\"|jit_\w+\.py\"|cutlass[/\\](?:base_)?dsl|[/\\]cute[/\\]|nvrtc|tvm_ffi|torch[/\\]_inductor"
           r"|in (?:build_and_load|jit_load|load_jit\w*|_jit_compile|build_jit\w*|_build_\w*extension\w*)$"),
    # (The KV transfer engines of prefill/decode disaggregation move the cache between servers as NCCL moves tensors:
    # SGLang's disaggregation/<engine>/, vLLM's distributed/kv_transfer/, a Python binding's transfer_engine.py.)
    Family("distributed_code", C.NCCL_ERROR, 50,
           frames=r"torch[/\\]distributed[/\\]|pynccl|[/\\]nccl\w*\.py|custom_all_reduce|parallel_state\.py"
           r"|[/\\]kv_transfer[/\\]|[/\\]disaggregation[/\\](?:mooncake|nixl|ascend|mori)[/\\]|transfer_engine\.py"),
)

BY_ID: dict[str, Family] = {f.id: f for f in FAMILIES}


def families_of(exception_type: str | None, frames: list[str]) -> list[Family]:
    """The families a traceback (its exception type, its frames innermost first) belongs to, most specific first."""
    typed = [f for f in FAMILIES if f.matches_type(exception_type)]
    found = [f for f in typed if f.frames_regex is None]
    found += [f for f in typed if f.anywhere and f.frames_regex and any(f.frames_regex.search(x) for x in frames)]
    for frame in frames[:INNERMOST_FRAMES]:
        here = [f for f in typed if not f.anywhere and f.frames_regex is not None and f.frames_regex.search(frame)]
        if here:
            found += here
            break
        if not PASS_THROUGH.search(frame):
            break
    return sorted(found, key=lambda f: -f.specificity)
