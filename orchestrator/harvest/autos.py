"""What "auto" settings resolved to, which versions the log names, and the `server_args=ServerArgs(...)` line.

Sources: reference/sglang-facts.md sections 3.2, 5 and 7 (the log lines SGLang prints when it picks a
backend or dtype itself) plus vLLM's version lines. A later line overrides an earlier one, because SGLang
prints overrides after the first choice (`FlashAttention3 only supports fp8_e4m3 ...; Setting attention
backend to triton.`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ARGS = 400
MAX_VALUE = 300


@dataclass(frozen=True)
class Extractor:
    """A literal every matching line contains, a regex, and the keys its groups fill (`*` = pairs from findall)."""

    needle: str
    pattern: re.Pattern[str]
    keys: tuple[str, ...]


def _x(needle: str, pattern: str, *keys: str) -> Extractor:
    return Extractor(needle, re.compile(pattern), keys)


RESOLVED: tuple[Extractor, ...] = (
    _x("Attention backend not specified", r"Attention backend not specified\. Use (\w+) backend", "attention_backend"),
    _x("Falling back to", r"Falling back to '(\w+)' for deterministic inference", "attention_backend"),
    _x("Use ", r"\bUse (\w+) (?:as )?attention backend", "attention_backend"),
    _x("Setting attention backend to", r"Setting attention backend to (\w+)", "attention_backend"),
    _x(
        "KV Cache: prefill=",
        r"Set (?:DSA|NSA) backends for (\S+) KV Cache: prefill=(\w+), decode=(\w+)",
        "kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend",
    ),
    _x("Setting KV cache dtype to", r"Setting KV cache dtype to (\w+)", "kv_cache_dtype"),
    _x("Using KV cache dtype", r"Using KV cache dtype: ([\w.]+)", "kv_cache_torch_dtype"),
    _x("KV Cache is allocated", r"KV Cache is allocated\. dtype: ([\w.]+)", "kv_cache_allocated_dtype"),
    _x("KV Cache is allocated", r"KV Cache is allocated\..*?#tokens: (\d+)", "kv_cache_tokens"),
    _x("MoE runner backend", r"\bUse (\w+) as MoE runner backend", "moe_runner_backend"),
    _x("Sampling backend is set to", r"Sampling backend is set to (\w+)", "sampling_backend"),
    _x("FP8 GEMM backend set to", r"FP8 GEMM backend set to '(\w+)'", "fp8_gemm_backend"),
    _x("Quantization not specified", r"Quantization not specified, default to (\w+)", "quantization"),
    _x("Detected FP8 expert weights", r"expert weights in checkpoint, default to (\w+)", "quantization"),
    _x("Setting page size to", r"Setting page size to (\d+)", "page_size"),
    # vLLM's platform: an out-of-tree plugin, or a built-in one it detected (vllm/platforms/__init__.py).
    _x("Platform plugin", r"Platform plugin (\w+) is activated", "platform"),
    _x("Automatically detected platform", r"Automatically detected platform (\w+)", "platform"),
    _x(
        "_total_num_tokens=",
        r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests|context_len)=(\d+)",
        "*",
    ),
)

VERSIONS: tuple[Extractor, ...] = (
    _x("sglang version", r"sglang version:?\s+v?(\d[\w.+\-]*)", "sglang"),
    _x("git revision", r"git revision:\s+(\S+)", "sglang_git_revision"),
    _x("LLM engine (v", r"LLM engine \(v(\d[\w.+\-]*)\)", "vllm"),
    _x("vLLM", r"vLLM (?:API server )?version:?\s+v?(\d[\w.+\-]*)", "vllm"),
    _x("==", r"^\s*([A-Za-z][\w.\-]*)==(\d[\w.+\-]*)\s*$", "*"),
    _x("PyTorch: ", r"^PyTorch: (\S+)", "torch"),
    _x("CUDA Driver Version", r"^CUDA Driver Version:?\s+(\S+)", "cuda_driver"),
    _x("NVCC: ", r"^NVCC: .*?release ([\d.]+)", "nvcc"),
)

NEEDLES: tuple[str, ...] = (*(e.needle for e in (*RESOLVED, *VERSIONS)), "server_args=ServerArgs(")

_PYTHON = re.compile(r"/python(3\.\d+)/")


def apply(extractors: tuple[Extractor, ...], text: str, into: dict[str, str]) -> None:
    """Fill `into` from every extractor whose needle and pattern match the message."""
    for ex in extractors:
        if ex.needle not in text:
            continue
        if ex.keys == ("*",):
            for key, value in ex.pattern.findall(text):
                into[key.lower().replace("-", "_")] = value
            continue
        m = ex.pattern.search(text)
        if m:
            for key, value in zip(ex.keys, m.groups(), strict=False):
                into[key] = value


def python_version(frame_line: str, into: dict[str, str]) -> None:
    """Record the Python version a traceback's paths show (`.../python3.10/site-packages/...`)."""
    if "python" not in into:
        m = _PYTHON.search(frame_line)
        if m:
            into["python"] = m.group(1)


def parse_server_args(text: str) -> dict[str, str]:
    """The fields of `server_args=ServerArgs(a=1, b='x', c=[1, 2])` as strings (quotes removed), bounded."""
    start = text.find("ServerArgs(")
    if start < 0:
        return {}
    out: dict[str, str] = {}
    depth, quote, field_start = 0, "", start + len("ServerArgs(")
    for i in range(field_start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
        elif (ch == "," and depth == 0) or ch == ")":
            _add_field(text[field_start:i], out)
            field_start = i + 1
            if ch == ")" or len(out) >= MAX_ARGS:
                break
    return out


def _add_field(part: str, out: dict[str, str]) -> None:
    name, sep, value = part.strip().partition("=")
    if not sep or not name.isidentifier():
        return
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    out[name] = value[:MAX_VALUE]
