"""The bench's simulated hosts: a throwaway loopback sshd (tests/sshd_host.py) or the local transport, scenario
and matrix files, hosts.yaml entries, and the intrinsic duration of a simulated cell.

Intrinsic duration of a cell = the time the simulated server itself spends by its scenario: the startup phases
it got through (import, init, load weights, memory alloc, CUDA graph capture, its own greedy warm-up request)
plus the decode time of each probe it answered (prefill_s + tokens x decode_token_s; the concurrent probe's
requests run side by side, so they count once, at the longest answer's token count). Everything else is
overhead: ours, the transport's, and the simulated server's own Python start and HTTP bring-up.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
# Scripts run as `python scripts/x.py` see only scripts/ on sys.path: every bench script imports this module first.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from orchestrator.model import Phase, ProbeResult  # noqa: E402
from orchestrator.sim import answers  # noqa: E402
from orchestrator.sim.scenario import Timing  # noqa: E402
from orchestrator.sim.server import WARMUP_PROMPT  # noqa: E402
from orchestrator.transport import SshTarget  # noqa: E402
from tests.sshd_host import SshdHost, login_user, missing_tools  # noqa: E402

DEADLINES = {
    "model_load": "20s", "memory_alloc": "10s", "cuda_graph_capture": "10s", "ready": "40s",
    "probe": "15s", "stop_grace": "3s", "gpu_release": "10s",
}  # fmt: skip
STARTUP_ORDER = (Phase.IMPORT, Phase.MODEL_LOAD, Phase.MEMORY_ALLOC, Phase.CUDA_GRAPH_CAPTURE, Phase.WARMUP)


@dataclass
class BenchEnv:
    """Where the bench runs: its temp dir, its sshd (None: local transport) and why."""

    root: Path
    sshd: SshdHost | None
    transport_note: str
    port_base: int
    huge_log: Path
    """Where the 1 GB log goes: in RAM (/dev/shm) when there is room, as the page cache would hold it anyway."""

    @classmethod
    def start(cls, want_ssh: bool = True) -> BenchEnv:
        """A temp dir and, when OpenSSH is here, a loopback sshd of our own."""
        root = Path(tempfile.mkdtemp(prefix="orch-bench-"))
        shm = Path("/dev/shm")
        roomy = shm.is_dir() and shutil.disk_usage(shm).free > 3 << 30
        huge = Path(tempfile.mkdtemp(prefix="orch-bench-", dir=shm if roomy else root)) / "server.log"
        # Below the kernel's ephemeral ports (32768 up), where outgoing connections would take them.
        port_base = 20000 + random.randrange(0, 1000)
        if not want_ssh:
            return cls(root, None, "local transport (--local given)", port_base, huge)
        missing = missing_tools()
        if missing:
            return cls(root, None, f"local transport: no loopback sshd ({', '.join(missing)} missing)", port_base, huge)
        try:
            sshd = SshdHost(login_user()).start()
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            return cls(root, None, f"local transport: the loopback sshd did not start ({exc})", port_base, huge)
        note = f"ssh to a throwaway loopback sshd, {sshd.user}@127.0.0.1:{sshd.port}"
        return cls(root, sshd, note, port_base, huge)

    def close(self) -> None:
        """Stop the sshd and remove the 1 GB log (the rest of the temp dir is left for a look: it is printed)."""
        if self.sshd is not None:
            self.sshd.cleanup()
        shutil.rmtree(self.huge_log.parent, ignore_errors=True)

    def target(self) -> SshTarget | None:
        """How the naive baseline connects (None: locally)."""
        return self.sshd.target() if self.sshd is not None else None

    def write(self, name: str, data: dict[str, Any]) -> Path:
        """A YAML file in the temp dir."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def hosts_file(self, name: str, scenario: Path, gpus: int = 8) -> Path:
        """A hosts.yaml with one simulated host `bench` of its own workdir (so its own simulated GPUs)."""
        entry: dict[str, Any] = {
            "scenario": str(scenario), "gpus": gpus, "workdir": str(self.root / name / "work"),
            "deadlines": DEADLINES, "port_base": self.port_base,
        }  # fmt: skip
        if self.sshd is not None:
            entry.update(
                ssh=f"{self.sshd.user}@127.0.0.1:{self.sshd.port}", identity_file=str(self.sshd.client_key),
                known_hosts=str(self.sshd.known_hosts), launcher=f"{sys.executable} -m orchestrator.sim",
            )  # fmt: skip
        else:
            entry["transport"] = "sim"
        return self.write(f"{name}/hosts.yaml", {"bench": entry})


def free_local_port(avoid: set[int]) -> int:
    """A port free on this machine (the simulated host is this machine), away from `avoid`."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if all(abs(port - q) >= 1100 for q in avoid):
            return port


def scenario(timing: dict[str, float], rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A scenario file's content: SGLang 0.5.9 on 8 simulated GPUs."""
    return {"version": "0.5.9", "gpus": 8, "timing": timing, "rules": rules}


def startup_s(timing: Timing, reached: Phase) -> float:
    """Seconds the simulated server spends in its startup phases up to and including `reached`."""
    warmup_tokens = answers.generate(WARMUP_PROMPT, max_new_tokens=8, temperature=0, seed=None, garbage=False)
    parts = {
        Phase.IMPORT: timing.import_s,
        Phase.MODEL_LOAD: timing.init_s + timing.load_weights_s,
        Phase.MEMORY_ALLOC: timing.memory_alloc_s,
        Phase.CUDA_GRAPH_CAPTURE: timing.capture_cuda_graph_s,
        Phase.WARMUP: timing.prefill_s + timing.warmup_s + warmup_tokens.completion_tokens * timing.decode_token_s,
    }
    upto = STARTUP_ORDER.index(reached) if reached in STARTUP_ORDER else len(STARTUP_ORDER) - 1
    return sum(parts[p] for p in STARTUP_ORDER[: upto + 1])


def probes_s(timing: Timing, probes: tuple[ProbeResult, ...]) -> float:
    """Simulated decode time of the probes the server answered."""
    total = 0.0
    for probe in probes:
        if not probe.ok or not probe.tokens:
            continue
        # Side by side (concurrent), the batch lasts as long as its longest answer.
        tokens = max(probe.tokens_each) if probe.tokens_each else probe.tokens
        total += timing.prefill_s + tokens * timing.decode_token_s
    return total


def intrinsic_s(timing: Timing, phase: Phase | None, probes: tuple[ProbeResult, ...]) -> float:
    """A cell's intrinsic duration: startup up to where it stopped, then the probes it answered."""
    if phase in STARTUP_ORDER:
        return startup_s(timing, phase)
    return startup_s(timing, Phase.WARMUP) + probes_s(timing, probes)


def median(values: list[float]) -> float:
    """The median (the middle value, or the mean of the two middle ones)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def listen_overflows() -> int:
    """How often a listening socket's accept queue overflowed on this machine (TcpExt ListenOverflows)."""
    try:
        names, values = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2]]
    except (OSError, ValueError):
        return 0
    return int(dict(zip(names, values, strict=True)).get("ListenOverflows", 0))
