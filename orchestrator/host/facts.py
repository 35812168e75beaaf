"""Host facts: each one a shell command plus a pure parser of its output (pyinfra's FactBase idea).

Preflight runs the commands through the transport; everything below the command strings is
pure and tested on recorded output.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import LaunchError

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


class NoGpuReading(LaunchError):
    """nvidia-smi gave no reading (missing, or it failed): which GPUs are held is unknown, never "free"."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


_SMI_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"nvidia-smi: (command not found|not found|No such file or directory)"),
        "install the NVIDIA driver's utilities on the host, or give the folder that holds nvidia-smi in the "
        "host's PATH (hosts.yaml: env: {PATH: ...})",
    ),
    (
        re.compile(r"Permission denied"),
        "make nvidia-smi executable for the login user (ls -l $(command -v nvidia-smi))",
    ),
    (
        re.compile(r"couldn't communicate with the NVIDIA driver|Failed to initialize NVML|Driver/library version"),
        "the NVIDIA driver is not loaded, or does not match its library (often after a driver upgrade without a "
        "reboot): run nvidia-smi on the host, and reboot it or reload the driver",
    ),
    (
        re.compile(r"No devices were found"),
        "no GPU is visible to the login user: check CUDA_VISIBLE_DEVICES and the device permissions (/dev/nvidia*)",
    ),
    (
        re.compile(r"fell off the bus|GPU is lost"),
        "a GPU fell off the bus: the host needs a reboot (ask its admin)",
    ),
)
"""nvidia-smi's failures as it words them, each with its fix; the first that matches wins."""


def gpu_query_problem(exit_code: int, stdout: str, stderr: str) -> str | None:
    """Why an nvidia-smi query gave no reading, with the host's words and the fix; None when it gave one.

    An empty answer of a successful query is a reading (no GPU process); a failed or missing nvidia-smi
    also prints nothing on stdout, so only its exit code and its words tell the two apart (some drivers
    print their failure and exit 0).
    """
    said = " ".join((stderr.strip() + " " + stdout.strip()).split())
    fix = next((fix for pattern, fix in _SMI_FAILURES if pattern.search(said)), None)
    if exit_code == 0 and fix is None:
        return None
    if exit_code == 127 or fix is _SMI_FAILURES[0][1]:
        what = "nvidia-smi is not installed or not on the PATH"
    else:
        what = f"nvidia-smi failed (exit {exit_code})"
    fix = fix or "run nvidia-smi on the host to see why it fails, and fix that first"
    return f"{what}; the host said: {host_words(said) or '(nothing)'} (fix: {fix})"


def read_gpu_processes(exit_code: int, stdout: str, stderr: str = "") -> list[GpuProcess]:
    """`GPU_APPS_QUERY`'s answer as parse_gpu_processes reads it; NoGpuReading when nvidia-smi gave none."""
    problem = gpu_query_problem(exit_code, stdout, stderr)
    if problem is not None:
        raise NoGpuReading(problem)
    return parse_gpu_processes(stdout)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def host_words(text: str, limit: int = 300) -> str:
    """The host's words as they go into a message: control characters made visible, at most `limit` long."""
    text = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


BUILD_PACKAGES = WATCHED_PACKAGES
"""Packages whose build (not only version) makes the install: a nightly wheel keeps its version string."""

_IDENTITY_SCRIPT = """import hashlib, json, os, re, sys
out = {"python": sys.executable}
try:
    from importlib import util, metadata
    spec = util.find_spec("sglang")
except Exception as exc:
    spec, out["missing"] = None, "%s: %s" % (type(exc).__name__, exc)
if spec is None or not spec.submodule_search_locations:
    out.setdefault("missing", "No module named 'sglang'")
    print(json.dumps(out))
    sys.exit(3)
root = os.path.realpath(list(spec.submodule_search_locations)[0])
out["location"] = root
digest, from_files = hashlib.sha256(), True
for name in sys.argv[1:]:
    try:
        dist = metadata.distribution(name)
        record, direct = dist.read_text("RECORD") or "", dist.read_text("direct_url.json") or ""
    except Exception:
        continue
    digest.update(("%s\\0%s\\0%s\\0%s\\0" % (name, dist.version, record, direct)).encode())
    if name == "sglang" and os.path.realpath(str(dist.locate_file("sglang"))) == root:
        info = json.loads(direct) if direct else {}
        out["commit"] = (info.get("vcs_info") or {}).get("commit_id")
        from_files = not record or bool((info.get("dir_info") or {}).get("editable"))
if from_files:
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            st = os.stat(os.path.join(top, f))
            rel = os.path.relpath(os.path.join(top, f), root)
            digest.update(("%s\\0%d\\0%d\\0" % (rel, st.st_size, st.st_mtime_ns)).encode())
    # SGLang's checkout keeps the package in python/sglang: its .git is two folders up, never further.
    git = os.path.dirname(os.path.dirname(root))
    try:
        head = open(os.path.join(git, ".git", "HEAD")).read().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            try:
                head = open(os.path.join(git, ".git", ref)).read().strip()
            except OSError:
                packed = open(os.path.join(git, ".git", "packed-refs")).read()
                head = re.search(r"^([0-9a-f]{40}) " + re.escape(ref) + "$", packed, re.M).group(1)
        out["commit"] = head if re.fullmatch("[0-9a-f]{40}", head) else None
    except (OSError, AttributeError):
        pass
if not out.get("commit"):
    try:
        text = open(os.path.join(root, "_version.py")).read()
        found = re.search(r"commit_id\\s*=\\s*[\\x27\\x22]g?([0-9a-f]{7,40})[\\x27\\x22]", text)
        out["commit"] = found.group(1) if found else None
    except OSError:
        pass
out["build"] = digest.hexdigest()[:16]
print(json.dumps(out))"""
"""Where the install's python finds SGLang, and a digest of its build, without importing it (seconds, and CUDA).

A wheel's build is its RECORD (every file with its sha256, and the dist's direct_url.json); the other watched
packages' RECORDs count too (a kernel package decides what runs). A checkout on sys.path or an editable
install has no RECORD of its code: its files' sizes and modification times stand in, and its git commit is
read from the checkout. Exit 3 when SGLang is not importable at all."""


def install_identity_command(python: str) -> str:
    """The command that prints an install's identity as JSON (its interpreter given, shell-quoted)."""
    return f"{python} -c {shlex.quote(_IDENTITY_SCRIPT)} {' '.join(BUILD_PACKAGES)}"


@dataclass(frozen=True)
class InstallIdentity:
    """Which SGLang an install's python finds, and which build it is."""

    build: str | None = None
    """A digest of the install's files (16 hex digits); None when the host could not say."""
    commit: str | None = None
    """SGLang's git commit, where the install exposes it."""
    location: str | None = None
    """The sglang package's folder on the host."""
    missing: str | None = None
    """Why the install's python has no SGLang, in the host's words; None when it has one."""


def parse_install_identity(exit_code: int, stdout: str, stderr: str = "") -> InstallIdentity:
    """The answer of `install_identity_command`; a python that did not even start is named `missing` too."""
    data: Mapping[str, Any] = {}
    for line in reversed(stdout.strip().splitlines()):
        try:
            loaded = json.loads(line)
        except ValueError:
            continue
        if isinstance(loaded, dict):
            data = loaded
            break

    def text(key: str) -> str | None:
        return str(data[key]) if data.get(key) else None

    if data.get("missing") or exit_code == 3:
        return InstallIdentity(missing=host_words(text("missing") or "No module named 'sglang'"))
    if not data:
        if exit_code == 0:
            return InstallIdentity()
        said = " ".join((stderr.strip() or stdout.strip()).split())
        return InstallIdentity(missing=f"the python did not run (exit {exit_code}): {host_words(said) or '(nothing)'}")
    return InstallIdentity(build=text("build"), commit=text("commit"), location=text("location"))
