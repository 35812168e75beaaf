"""The vocabularies that name a family by its words (knowledge/vocabulary.py): what they take, and the progress and
notice lines every healthy launch prints that they must leave alone."""

from __future__ import annotations

import re

import pytest

from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.knowledge.signatures import BY_ID
from orchestrator.knowledge.vocabulary import (
    CACHE_SHORTAGE,
    CHECKPOINT_FAULT,
    DISTRIBUTED_FAILURE,
    PACKAGE_ABSENT,
    TOKENIZER_FAULT,
    names_no_argument,
)
from orchestrator.model import Category


@pytest.mark.parametrize(
    ("vocabulary", "message"),
    [
        (CACHE_SHORTAGE, "Not enough space for mamba cache, try to increase --mamba-full-memory-ratio"),
        (CACHE_SHORTAGE, "max_num_seqs (256) exceeds available Mamba cache blocks (120)."),
        (CACHE_SHORTAGE, "SWA pool (2048 tokens) cannot hold even one request"),
        (CACHE_SHORTAGE, "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.7"),
        (CACHE_SHORTAGE, "Not enough room in the budget to cache it. Increase `gpu_memory_utilization`."),
        (CACHE_SHORTAGE, "KV cache is too small for the requested context length (32768 tokens)."),
        (CACHE_SHORTAGE, "max_total_num_tokens=0 is too small; the memory left after the weights holds no KV cache"),
        (CACHE_SHORTAGE, "The requested 40960 tokens exceed the available KV cache (23648 tokens)."),
        (TOKENIZER_FAULT, "tokenizer does not define required token <|image_pad|>"),
        (TOKENIZER_FAULT, "Only fast tokenizers are supported."),
        (TOKENIZER_FAULT, "Cannot apply chat template to an empty conversation."),
        (CHECKPOINT_FAULT, "No model weights found in: `/data/models/x`"),
        (CHECKPOINT_FAULT, "Following weights were not initialized from checkpoint: {'lm_head.weight'}"),
        (CHECKPOINT_FAULT, "Rank-3 checksum mismatch for presharded checkpoint at /ckpt"),
        (PACKAGE_ABSENT, "cuda.bindings is not available. Install it with: pip install cuda-python"),
        (PACKAGE_ABSENT, "DeepGEMM is not available. This usually means the deep_gemm package is not installed"),
        (DISTRIBUTED_FAILURE, "No IB devices found in /sys/class/infiniband"),
        (DISTRIBUTED_FAILURE, "Lost connection with prefill instance (bootstrap_addr: 10.0.0.5:8998)"),
    ],
)
def test_a_vocabulary_takes_its_family(vocabulary: re.Pattern[str], message: str) -> None:
    assert vocabulary.search(message)


@pytest.mark.parametrize(
    "word",
    ["c10d", "Gloo", "GLOO", "rendezvous", "Rendezvous", "rdzv_backend", "TCPStore", "ProcessGroupGloo", "ibv_reg_mr",
     "RDMA", "connectFullMesh", "init_process_group", "torch.distributed", "DistStoreError", "MASTER_ADDR",
     "IB device", "InfiniBand", "bootstrap_addr", "bootstrap server", "HCCL", "HCCS", "hcclCommInitRootInfo",
     "oneCCL", "CCL_ATL_TRANSPORT", "NVSHMEM", "nvshmemi_common_init"],
)
def test_every_word_of_the_distributed_vocabulary_reaches_its_row(word: str) -> None:
    # The row's needles keep its regex off most lines: a word the vocabulary names but no needle holds is never read.
    assert BY_ID["distributed_failure"].matches(f"RuntimeError: {word} setup failed on rank 1")


@pytest.mark.parametrize(
    "word",
    ["checkpoint", "Checkpoints", "CHECKPOINT", "weights", "Weight file", "WEIGHTS", "safetensors", "SAFETENSORS",
     "state_dict", "state dict", "STATE_DICT", "config.json", "configuration of", "serialized model", "shard",
     "Shards", "quantization config", "hf_quant_config.json", "GGUF", "gguf"],
)
def test_every_word_of_the_checkpoint_vocabulary_reaches_its_row(word: str) -> None:
    assert BY_ID["checkpoint_fault"].matches(f"RuntimeError: failed to load the {word} of rank 1")


@pytest.mark.parametrize(
    "line",
    [
        # vLLM's GGUF loader (`Failed to map GGUF parameters (N): [...]`): the checkpoint's tensors do not fit.
        "RuntimeError: Failed to map GGUF parameters (48): ['model.layers.0.mlp.experts.gate_up_proj']",
        "ValueError: failed to parse the GGUF header of /models/m/model-q4_k_m.gguf",
        "OSError: SAFETENSORS header of shard 3 is corrupt",
    ],
)
def test_a_checkpoint_fault_in_any_case_is_the_weights(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (Category.WEIGHTS_LOAD_ERROR, line)


@pytest.mark.parametrize(
    "line",
    [
        # The collective libraries of other accelerators, worded in prose: Ascend's HCCL (torch_npu) and Intel's oneCCL
        # (its C++ exceptions, `oneCCL: <file>:<line> <function>: EXCEPTION: ...`).
        "RuntimeError: npu/csrc/distributed/ProcessGroupHCCL.cpp:512 HCCL function error: HcclAllReduce(...), "
        "error code is 7",
        "RuntimeError: oneCCL: atl_ofi.cpp:307 open_providers: EXCEPTION: failed to initialize the ofi transport",
        "[rank3] ERROR 01-05 10:00:40 [xpu_communicator.py:20] oneCCL allreduce failed: connection reset by peer",
        # NVSHMEM, the GPU-to-GPU transport under DeepEP, whose initialisation fails (its `NVSHMEM INFO` lines too).
        "/sgl-workspace/nvshmem/src/host/init/init.cu:1012: non-zero status: 7 nvshmem detect topo failed",
        "h1:4242:4242 [1] NVSHMEM INFO nvshmemi_common_init failed, continuing",
    ],
)
def test_another_accelerators_collective_library_failing_is_the_distributed_runtime(line: str) -> None:
    verdict = classify(extract_evidence([line]))
    assert (verdict.category, verdict.root_cause_line) == (Category.NCCL_ERROR, line)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 01-05 10:00:40 [kv_cache_utils.py:1000] GPU KV cache size: 1,234,560 tokens",
        "[2026-01-05 10:00:41 TP0] KV Cache is allocated. #tokens: 412345, K size: 20.1 GB, V size: 20.1 GB",
        "INFO 01-05 10:00:30 [default_loader.py:300] Loading safetensors checkpoint shards: 100% Completed | 4/4",
        "[2026-01-05 10:00:20 TP0] Load weight begin. avail mem=78.50 GB",
        "INFO 01-05 10:00:10 [tokenizer.py:80] Using a slow tokenizer. This might cause a significant slowdown.",
        "INFO 01-05 10:00:50 [gpu_worker.py:300] Available KV cache memory: 61.20 GiB",
        "[2026-01-05 10:00:42 TP0] Capture cuda graph end. Time elapsed: 12.1 s. mem usage=1.2 GB. avail mem=5.1 GB.",
    ],
)
def test_healthy_start_up_lines_stay_healthy(line: str) -> None:
    assert classify(extract_evidence([line])).category is Category.HEALTHY


def test_a_message_naming_an_argument_is_the_arguments_first() -> None:
    assert not names_no_argument("--tokenizer-mode must be one of ['auto', 'slow']")
    assert names_no_argument("tokenizer does not define required token <|image_pad|>")


@pytest.mark.parametrize(
    "notice",
    [
        "[2026-01-05 10:00:02 TP0] The tokenizer does not define a pad token; using eos_token as pad_token.",
        "[2026-01-05 10:00:03 TP0] No quantization scales found in checkpoint; using 1.0 for all kv_scale.",
        "[2026-01-05 10:00:04 TP0] KV cache is not enough for max_running_requests=512; reducing to 128.",
    ],
)
def test_a_notice_of_a_fallback_does_not_take_the_place_of_the_failure(notice: str) -> None:
    # A notice that says what the server does instead names no cause: the exception after it decides.
    lines = [notice, "Traceback (most recent call last):", '  File "/x/scheduler.py", line 3, in event_loop',
             "    run()", "KeyError: 'choices'"]
    verdict = classify(extract_evidence(lines))
    assert (verdict.category, verdict.root_cause_line) == (Category.PYTHON_EXCEPTION_OTHER, lines[-1])


_TRACEBACK = ["Traceback (most recent call last):", '  File "/x/dispatch.py", line 23, in pick', "    return {"]


@pytest.mark.parametrize(
    ("key", "category"),
    [
        # A table keyed by architecture that lacks this GPU (a kernel library's dispatch, a chip-info lookup).
        ("'sm_100a'", Category.KERNEL_NOT_SUPPORTED_ON_ARCH),
        ("'90a'", Category.KERNEL_NOT_SUPPORTED_ON_ARCH),
        ("'gfx1201'", Category.KERNEL_NOT_SUPPORTED_ON_ARCH),
        # A bare number or the config's `architectures` key says nothing of the GPU.
        ("'120'", Category.PYTHON_EXCEPTION_OTHER),
        ("'architectures'", Category.PYTHON_EXCEPTION_OTHER),
    ],
)
def test_a_key_error_on_an_architecture_is_the_architecture(key: str, category: Category) -> None:
    line = f"KeyError: {key}"
    verdict = classify(extract_evidence([*_TRACEBACK, line]))
    assert (verdict.category, verdict.root_cause_line) == (category, line)
