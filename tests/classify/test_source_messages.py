"""Failure messages taken from the projects' source (tests/data/source-messages/messages.jsonl), each placed in the
minimal log a launch that raised or logged it would print, read through the real harvest and verdict.

The messages were collected from the code of SGLang, vLLM, PyTorch/c10d, NCCL, Gloo, FlashInfer, DeepGEMM,
transformers and huggingface_hub (their `raise`, `assert` and logger calls, C++ checks and NCCL `WARN`s), with
plausible values in place of f-string fields, and labelled by what reference/taxonomy.md says each means. They test
whether the classifier's families hold on what the projects print, not on the logs the rules were written on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.read import read_evidence
from orchestrator.model import Category

SOURCE_MESSAGES = Path(__file__).resolve().parents[1] / "data" / "source-messages"
MESSAGES = SOURCE_MESSAGES / "messages.jsonl"
HELD_OUT = SOURCE_MESSAGES / "held-out.jsonl"
"""Messages collected after the families were written, and not used to write them: how the families generalise."""
SITE = "/usr/local/lib/python3.12/site-packages"
_SGLANG_START = ["[2026-01-05 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=2, port=30000)"]
_VLLM_START = ["INFO 01-05 10:00:00 [core.py:70] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/m'"]
_AFTER_LOAD = {
    "sglang": "[2026-01-05 10:00:40 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=61.20 GB, mem usage=15.04 GB.",
    "vllm": "INFO 01-05 10:00:40 [gpu_model_runner.py:2000] Model loading took 15.04 GiB and 38.2 seconds",
}
_SERVING = {
    "sglang": "[2026-01-05 10:01:20] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "vllm": "INFO 01-05 10:01:20 [api_server.py:1900] Starting vLLM API server 0 on http://0.0.0.0:8000",
}
_LOADED_BEFORE = {"kv_cache_too_small", "cuda_oom", "cuda_graph_capture_failed", "illegal_memory_access",
                  "cuda_device_assert", "nan_in_probs", "gpu_memory_in_use"}
_PYTHON_CALLER = {
    # Where Python code runs when a message comes from native code (the frame a traceback ends in).
    "pytorch/pytorch:torch/csrc/distributed": ("torch/distributed/distributed_c10d.py", "init_process_group"),
    "pytorch/pytorch:c10": ("torch/cuda/memory.py", "empty_cache"),
    "pytorch/pytorch:torch/csrc/cuda": ("torch/cuda/nccl.py", "all_reduce"),
    "pytorch/pytorch:aten": ("torch/nn/functional.py", "linear"),
    "facebookincubator/gloo:": ("torch/distributed/distributed_c10d.py", "new_group"),
    "deepseek-ai/DeepGEMM:": ("deep_gemm/__init__.py", "fp8_gemm_nt"),
    "huggingface/safetensors:": ("safetensors/torch.py", "load_file"),
    "huggingface/tokenizers:": ("transformers/tokenization_utils_fast.py", "__init__"),
    "triton-lang/triton:": ("triton/compiler/compiler.py", "compile"),
    "NVIDIA/cutlass:": ("cutlass/base_dsl/compiler.py", "compile"),
    "pallets/jinja:": ("jinja2/environment.py", "from_string"),
    "python/cpython:": ("uvicorn/server.py", "startup"),
}


@dataclass(frozen=True)
class Message:
    text: str
    category: Category
    also_ok: tuple[Category, ...]
    origin: str
    form: str
    exception: str
    function: str
    known_miss: str

    @property
    def engine(self) -> str:
        return "vllm" if self.origin.startswith("vllm-project/") else "sglang"


def load_messages(path: Path = MESSAGES) -> list[Message]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        d = json.loads(raw)
        out.append(Message(d["text"], Category(d["category"]), tuple(Category(c) for c in d.get("also_ok", ())),
                           d["origin"], d["form"], d.get("exception", ""), d.get("function", ""),
                           d.get("known_miss", "")))
    return out


def _frame(message: Message) -> tuple[str, str]:
    path = message.origin.split(":", 1)[1]
    if path.endswith(".py"):
        for root in ("python/", "src/", "sgl-kernel/python/"):
            path = path.removeprefix(root)
        return path, message.function or "__init__"
    caller = next((v for k, v in _PYTHON_CALLER.items() if message.origin.startswith(k)), None)
    assert caller is not None, f"no Python caller known for {message.origin}"
    return caller


def _logged(message: Message) -> list[str]:
    repo, path = message.origin.split(":", 1)
    first, *rest = message.text.split("\n")
    name = path.rsplit("/", 1)[-1]
    if ": error: " in first:  # argparse prints its usage and the error to stderr, no logger involved
        return [f"usage: {first.split(': error: ')[0]} [-h] [--model-path MODEL_PATH]", first]
    if repo == "NVIDIA/nccl":
        return [f"node-1:2841:3120 [0] {name}:412 NCCL WARN {first}", *rest]
    if repo == "pytorch/pytorch":
        return [f"[rank0]:[E0105 10:02:11.123456000 2841 {name}:1013] {first}", *rest]
    if message.engine == "vllm":
        return [f"ERROR 01-05 10:02:11 [{name}:412] {x}" for x in (first, *rest)]
    return [f"[2026-01-05 10:02:11 TP0] {x}" for x in (first, *rest)]


def build_log(message: Message) -> list[str]:
    """The lines a launch that printed this message would leave: its start, then the failure as the code prints it."""
    lines = list(_VLLM_START if message.engine == "vllm" else _SGLANG_START)
    if message.category in _LOADED_BEFORE:
        lines.append(_AFTER_LOAD[message.engine])
    if message.category is Category.WARMUP_REQUEST_FAILED:
        lines += [_AFTER_LOAD[message.engine], _SERVING[message.engine]]
    if message.form == "logger":
        return lines + _logged(message)
    path, function = _frame(message)
    entry = ("vllm/v1/engine/core.py", "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)") \
        if message.engine == "vllm" else \
        ("sglang/srt/managers/scheduler.py", "run_scheduler_process", "scheduler = Scheduler(server_args, port_args)")
    if message.category is Category.WARMUP_REQUEST_FAILED:
        entry = ("sglang/srt/entrypoints/http_server.py", "_wait_and_warmup", "_execute_server_warmup(server_args)")
    first, *rest = message.text.split("\n")
    return [
        *lines,
        "Traceback (most recent call last):",
        f'  File "{SITE}/{entry[0]}", line 2410, in {entry[1]}',
        f"    {entry[2]}",
        f'  File "{SITE}/{path}", line 318, in {function}',
        f"    raise {message.exception.rsplit('.', 1)[-1]}(",
        f"{message.exception}: {first}" if first else message.exception,
        *rest,
    ]


MESSAGE_LIST = load_messages() + load_messages(HELD_OUT)


def test_no_held_out_message_is_among_those_the_families_were_written_on() -> None:
    assert not {m.text for m in load_messages()} & {m.text for m in load_messages(HELD_OUT)}


def _id(message: Message) -> str:
    return f"{message.category.value}:{message.text[:60]}"


def test_the_collection_covers_the_taxonomy_broadly() -> None:
    categories = {m.category for m in MESSAGE_LIST}
    assert len(MESSAGE_LIST) >= 150
    assert len(categories) >= 12
    assert all(m.form in ("exception", "logger") for m in MESSAGE_LIST)
    assert len({m.text for m in MESSAGE_LIST}) == len(MESSAGE_LIST)


def _case(message: Message) -> object:
    # A message the families do not yet place says why in the data; strict, so a fix shows as an unexpected pass.
    marks = [pytest.mark.xfail(reason=message.known_miss, strict=True)] if message.known_miss else []
    return pytest.param(message, marks=marks, id=_id(message))


@pytest.mark.parametrize("message", [_case(m) for m in MESSAGE_LIST])
def test_a_message_from_the_source_names_its_category(message: Message, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    lines = build_log(message)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    verdict = classify(read_evidence(log))
    assert verdict.category in (message.category, *message.also_ok), (verdict.category, verdict.root_cause_line)
