"""Which accelerator platform vLLM runs on, and what that makes harmless.

vLLM picks its platform at start-up (vllm/platforms/__init__.py): a built-in one (`Automatically detected platform
cuda.`, logged at INFO or DEBUG by version) or an out-of-tree plugin (`Platform plugin neuron is activated`:
vllm-neuron, vllm-ascend, vllm-gaudi, ...). The platform's `import_kernels` (vllm/platforms/interface.py;
vllm/_custom_ops.py in older releases) imports vLLM's compiled ops, `vllm._C`, and on failure only logs
`Failed to import from vllm._C: %r` (`... with %r` before) and goes on. A CUDA build of vLLM on an Inferentia, TPU or
Ascend host always fails that import (`libcuda.so.1: cannot open shared object file`) and runs on its plugin's own
kernels: there the warning is no cause. On a platform whose kernels are `vllm._C` (CUDA, ROCm, CPU, XPU builds) the
failed import still is one.
"""

from __future__ import annotations

import re

ENGINE_OPS_PLATFORMS: frozenset[str] = frozenset({"cuda", "rocm", "cpu", "xpu"})
"""The platforms whose kernels are vLLM's own compiled ops (`vllm._C`, `vllm._moe_C`, ...)."""

ENGINE_OPS_IMPORT = re.compile(r"Failed to import from vllm\._\w*C\b")
"""vLLM's warning that its compiled ops did not import (the import is caught and the process goes on)."""


def engine_ops_unneeded(message: str, platform: str | None) -> bool:
    """Whether a message is vLLM's caught failure to import its compiled ops on a platform (as the log names it)
    that runs on other kernels, where the failure is expected and harmless."""
    if platform is None or platform.lower() in ENGINE_OPS_PLATFORMS:
        return False
    return ENGINE_OPS_IMPORT.search(message) is not None
