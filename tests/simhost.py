"""Test helpers: a hosts file for the simulated host (over the loopback sshd or local), and the CLI as users run it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.paths import REPO
from tests.sshd_host import SshdHost

INCIDENT_SCENARIO = REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml"
FAST_DEADLINES = {
    "model_load": "4s",
    "memory_alloc": "4s",
    "cuda_graph_capture": "4s",
    "ready": "10s",
    "probe": "8s",
    "stop_grace": "2s",
    "gpu_release": "5s",
}


def random_port_base() -> int:
    """A test host's port base: random, so that test sessions side by side do not race for the default 30000,
    and low, so that the host's first candidate ports lie below the kernel's ephemeral range (32768 and up):
    a server binds its port only when its startup ends, and an outgoing connection (squeue, ssh, a probe) could
    take an ephemeral port between the pick and the bind."""
    return random.randrange(10000, 21000, 10)


def write_hosts(
    path: Path,
    workdir: Path,
    *,
    scenario: Path = INCIDENT_SCENARIO,
    sshd: SshdHost | None = None,
    env: dict[str, Any] | None = None,
    deadlines: dict[str, str] | None = None,
    gpus: int = 8,
    name: str = "simhost",
    **extra: Any,
) -> Path:
    """A hosts.yaml with one host (`simhost`): the simulated SGLang host, over SSH when `sshd` is given.

    `extra` adds or replaces keys of the entry.
    """
    entry: dict[str, Any] = {
        "scenario": str(scenario),
        "gpus": gpus,
        "workdir": str(workdir),
        "deadlines": deadlines or FAST_DEADLINES,
        "port_base": random_port_base(),
    }
    if sshd is not None:
        entry.update(
            ssh=f"{sshd.user}@127.0.0.1:{sshd.port}",
            identity_file=str(sshd.client_key),
            known_hosts=str(sshd.known_hosts),
            launcher=f"{sys.executable} -m orchestrator.sim",
        )
    else:
        entry["transport"] = "sim"
    if env:
        entry["env"] = env
    entry.update(extra)
    path.write_text(yaml.safe_dump({name: entry}, sort_keys=False, allow_unicode=True))
    return path


def orchestrator(
    *args: str, db: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child process, as a user would (from a script: no terminal to answer a prompt)."""
    full_env = {**os.environ, "ORCHESTRATOR_DB": str(db), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=REPO,
    )


def run_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON object printed by `orchestrator run --json` (fails the test with the output if none)."""
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def sim_gpu_holders(workdir: Path) -> list[str]:
    """What the fake nvidia-smi of a simulated host reports holding GPU memory."""
    out = subprocess.run(
        [
            str(REPO / "orchestrator" / "sim" / "bin" / "nvidia-smi"),
            "--query-compute-apps=pid,gpu_uuid,used_memory",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "ORCH_SIM_GPU_STATE": str(workdir / "gpu-state")},
    )
    return [line for line in out.stdout.splitlines() if line.strip() and line.strip()[0].isdigit()]


def processes_under(workdir: Path) -> list[str]:
    """Live processes whose command line or working directory points into `workdir` (ours, if any are left)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            args = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if str(workdir) in args or cwd.startswith(str(workdir)):
            found.append(f"{entry}: {args.strip()}")
    return found
