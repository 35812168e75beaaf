"""The failure signature table: general patterns of SGLang, vLLM, PyTorch, CUDA, NCCL and Python messages.

Adding a signature is adding a row to the module of the category it names:
- rows_config.py: invalid_argument, unsupported_config (the launch configuration);
- rows_memory.py: cuda_oom, kv_cache_too_small, gpu_memory_in_use (device memory);
- rows_device.py: nan_in_probs, cuda_device_assert, illegal_memory_access, cuda_graph_capture_failed (faults while
  kernels run);
- rows_kernels.py: kernel_not_supported_on_arch, kernel_jit_error (kernels for this GPU, built just in time);
- rows_distributed.py: nccl_error (NCCL, other accelerators' collectives, torch.distributed, RDMA, Ray);
- rows_loading.py: import_error, weights_load_error, tokenizer_or_template_error (what the server loads);
- rows_runtime.py: hang_or_timeout, process_killed, port_in_use, warmup_request_failed, python_exception_other,
  unknown (the process as it runs).
A family told by the words a message uses takes them from vocabulary.py (one place for each list of words and the
needles that find them); a family told by the structure of a traceback is a row of families.py.

Sources: reference/sglang-facts.md section 4, the real crash logs in ../shared/fixtures/crash-logs/, and the
messages of the libraries they quote. Specificity bands: 90+ the cause named outright (NaN in sampling, argparse
rejection); 70-89 a specific CUDA/NCCL/memory/kernel failure; 40-69 a recognisable kind of error; 20 any Python
exception; below 20 what only shows that something died (a signal, `Killed`, a bare traceback header) and generic
follow-ups, which never beat a cause. When several rows match a log, the most specific wins (ties: the earliest
line); rows of one specificity that match one message name one category (tests/knowledge/test_signatures.py), so
the order the modules are joined in below never decides a category.
Patterns are searched in a line's message, with its timestamp/rank/level prefix removed.
"""

from __future__ import annotations

from orchestrator.knowledge.patterns import Signature, sig
from orchestrator.knowledge.rows_config import CONFIG_ROWS
from orchestrator.knowledge.rows_device import DEVICE_ROWS
from orchestrator.knowledge.rows_distributed import DISTRIBUTED_ROWS
from orchestrator.knowledge.rows_kernels import KERNEL_ROWS
from orchestrator.knowledge.rows_loading import LOADING_ROWS
from orchestrator.knowledge.rows_memory import MEMORY_ROWS
from orchestrator.knowledge.rows_runtime import RUNTIME_ROWS
from orchestrator.model import Category as C

SIGNATURES: tuple[Signature, ...] = (
    *CONFIG_ROWS,
    *MEMORY_ROWS,
    *DEVICE_ROWS,
    *KERNEL_ROWS,
    *DISTRIBUTED_ROWS,
    *LOADING_ROWS,
    *RUNTIME_ROWS,
)

LEVEL_ROWS: tuple[Signature, ...] = (
    sig("error_statement", C.UNKNOWN, 11, r"", (), example="ERROR 01-01 12:00:00 worker.py:12] worker 3 failed"),
)
"""Rows matched by a line's level (ERROR, CRITICAL, FATAL), not its words: an error no other row names.
Never fatal on their own line (the readiness wait does not stop on them): whether the server survived
an error logged at ERROR level shows only in the lines after it."""

BY_ID: dict[str, Signature] = {s.id: s for s in (*SIGNATURES, *LEVEL_ROWS)}

NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(n for s in SIGNATURES for n in s.needles))
