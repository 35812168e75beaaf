"""Host facts: each one a shell command plus a pure parser of its output (pyinfra's FactBase idea).

Preflight runs the commands through the transport; everything below the command strings is
pure and tested on recorded output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GPU_QUERY = "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits"
GPU_APPS_QUERY = "nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits"


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    uuid: str
    memory_used_mb: int
    memory_total_mb: int


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int
    gpu_uuid: str
    used_mb: int


@dataclass(frozen=True)
class GpuHolder:
    """A process holding one of the GPUs, resolved to the GPU's index."""

    pid: int
    gpu_index: int
    used_mb: int
    ours: bool


def _int(text: str) -> int:
    try:
        return int(float(text.strip()))
    except ValueError:
        return 0


def parse_gpus(output: str) -> list[Gpu]:
    """Parse `GPU_QUERY` output (`0, GPU-abc, 10, 97871`)."""
    gpus = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            gpus.append(Gpu(int(parts[0]), parts[1], _int(parts[2]), _int(parts[3])))
    return gpus


def parse_gpu_processes(output: str) -> list[GpuProcess]:
    """Parse `GPU_APPS_QUERY` output (`1234, GPU-abc, 70000`); 'No running processes' yields []."""
    found = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            found.append(GpuProcess(int(parts[0]), parts[1], _int(parts[2])))
    return found


def gpu_holders(gpus: list[Gpu], processes: list[GpuProcess], our_pids: set[int]) -> list[GpuHolder]:
    """Which process holds which GPU index, and whether it belongs to one of our launches."""
    index_of = {g.uuid: g.index for g in gpus}
    return [
        GpuHolder(p.pid, index_of[p.gpu_uuid], p.used_mb, p.pid in our_pids)
        for p in processes
        if p.gpu_uuid in index_of
    ]


_VERSION_SCRIPT = """import importlib.metadata as m
try:
    print(m.version("sglang"))
except Exception:
    import sglang
    print(sglang.__version__)"""
"""The installed distribution's version first (no import: importing SGLang takes seconds and needs CUDA
libraries), then the package's own `__version__` for a checkout on sys.path without metadata."""


def sglang_version_command(python: str, sglang_cli: str | None = None) -> str:
    """The command that prints the SGLang version of an install (its interpreter and CLI given, shell-quoted).

    Falls back to `sglang version` (`sglang version: 0.5.19`), which the install's own CLI prints.
    """
    command = f"{python} -c '{_VERSION_SCRIPT}' 2>/dev/null"
    if sglang_cli:
        command += f" || {sglang_cli} version 2>/dev/null"
    return command


_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:[.\w+-]*)?)")


def parse_version(output: str) -> str | None:
    """The first version-looking token of a command's output (`sglang version: 0.5.9` -> 0.5.9)."""
    for line in output.splitlines():
        match = _VERSION.search(line)
        if match:
            return match.group(1)
    return None


PIP_LIST = "-m pip list --format=freeze --disable-pip-version-check"

WATCHED_PACKAGES = (
    "sglang",
    "sgl-kernel",
    "sglang-kernel",
    "torch",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "deep-gemm",
    "triton",
    "transformers",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "cuda-python",
)
"""Packages whose versions decide SGLang's behaviour; recorded per sweep so `compare` can diff them."""


def parse_packages(output: str) -> dict[str, str]:
    """`name==version` lines (pip freeze) -> {normalised name: version}, watched packages only."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        name, sep, version = line.strip().partition("==")
        if not sep:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in WATCHED_PACKAGES:
            found[key] = version.strip()
    return found


def parse_driver(output: str) -> dict[str, str]:
    """`NVIDIA RTX PRO 6000, 580.82, 12.0` lines -> gpu name, driver and compute capability."""
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            return {"gpu_name": parts[0], "driver": parts[1], "compute_cap": parts[2]}
    return {}
