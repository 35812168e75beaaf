"""A host as the sweep sees it: its transport, launcher, GPUs, ports, SGLang installs and lock.

Every host command goes through here, prefixed with the host's plain environment (for the
simulated host that is where the fake `nvidia-smi` and its GPU state live), so facts, launches
and probes all see the same machine.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import sys
import time
from functools import cached_property
from pathlib import Path
from typing import Literal

from orchestrator.config.model import HostConfig, resolve_env
from orchestrator.errors import HostBusy, LaunchError
from orchestrator.host import facts
from orchestrator.host.launcher import Launcher
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help
from orchestrator.probe.client import ProbeClient
from orchestrator.transport import open_transport
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.shell import quote
from orchestrator.transport.ssh_target import SshTarget

SIM_BIN = Path(__file__).resolve().parents[1] / "sim" / "bin"
PORT_SPACING = 1100
"""SGLang derives NCCL and other internal ports from --port (+100..1000); closer servers cross-talk."""

_FREE_PORTS_SCRIPT = """
import socket, sys
for p in map(int, sys.argv[1:]):
    s = socket.socket()
    # As the server will: a port whose old connections linger in TIME_WAIT is free to listen on.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()
"""


_GRAMMARS: dict[tuple[str, str | None, tuple[str, ...]], FlagGrammar] = {}
"""Grammars read this process, per host, install and launcher: `--help` of a real install takes seconds."""


_LISTENER_SCRIPT = """
import os, sys
port, pgid = int(sys.argv[1]), int(sys.argv[2])
inodes = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        f = row.split()
        if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f[9])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.getpgid(int(pid)) != pgid:
            continue
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] in inodes:
                print("ours"); sys.exit(0)
    except OSError:
        continue
print("foreign" if inodes else "none")
"""


class HostSession:
    """One open connection to a host, with everything the sweep asks of it."""

    def __init__(self, config: HostConfig, transport: Transport):
        self.config = config
        self.transport = transport
        self.launcher = Launcher(transport)

    @classmethod
    def open(cls, config: HostConfig) -> HostSession:
        """Connect to the host the config names."""
        return cls(config, open_transport(transport_spec(config)))

    def close(self) -> None:
        """Close the connection (launches keep running: they are detached)."""
        self.transport.close()

    @property
    def is_sim(self) -> bool:
        """Whether this host is the built-in simulated one."""
        return self.config.transport == "sim" or self.config.scenario is not None

    @cached_property
    def workdir(self) -> str:
        """The host's working directory, absolute, created if missing."""
        raw = self.config.workdir
        target = f'"$HOME"/{quote(raw[2:])}' if raw.startswith("~/") else quote(raw)
        result = self.sh(f"mkdir -p {target} && cd {target} && pwd", timeout=30)
        if result.exit_code != 0:
            raise LaunchError(f"cannot create the working directory {raw} on {self.config.name}: {result.stderr_text}")
        return result.text.strip()

    @cached_property
    def base_env(self) -> dict[str, str]:
        """The plain environment every host command and launch gets."""
        env, _ = resolve_env(self.config.env, os.environ, self.config.secrets)
        if self.is_sim:
            state = posixpath.join(self.workdir, "gpu-state")
            env.setdefault("ORCH_SIM_GPU_STATE", state)
            env.setdefault("ORCH_SIM_GPUS", str(self.config.gpus))
            env["PATH"] = f"{SIM_BIN}:{env.get('PATH', '/usr/local/bin:/usr/bin:/bin')}"
        return env

    def sh(self, command: str, timeout: float = 60.0) -> CommandResult:
        """Run a command on the host with the host's environment."""
        exports = "".join(f"export {k}={quote(v)}; " for k, v in sorted(self._env_for_shell().items()))
        return self.transport.run(exports + command, timeout=timeout)

    def _env_for_shell(self) -> dict[str, str]:
        if "workdir" not in self.__dict__:
            return resolve_env(self.config.env, os.environ, self.config.secrets)[0]
        return self.base_env

    def launcher_words(self, install: str | None = None) -> list[str]:
        """The command that starts SGLang for an install (before its flags)."""
        if install is not None or not self.is_sim:
            words = shlex.split(self.config.launcher_for(install))
            return absolute_scenario(words) if self.is_sim else words
        words = [sys.executable, "-m", "orchestrator.sim"]
        if self.config.scenario:
            words += ["--scenario", str(Path(self.config.scenario).resolve())]
        return words

    def grammar(self, install: str | None = None) -> FlagGrammar:
        """The flag grammar of an install, read from its real `--help` output (cached)."""
        key = (self.config.name, install, tuple(self.launcher_words(install)))
        if key not in _GRAMMARS:
            words = self.launcher_words(install)
            cmd = "COLUMNS=200 " + " ".join(quote(w) for w in [*words, "--help"]) + " 2>/dev/null"
            result = self.sh(cmd, timeout=300)
            if "usage:" not in result.text:
                raise LaunchError(
                    f"`{' '.join(words)} --help` on {self.config.name} printed no usage (exit {result.exit_code}): "
                    f"{(result.stderr_text or result.text)[-400:]}"
                )
            _GRAMMARS[key] = parse_help(result.text, self.sglang_version(install))
        return _GRAMMARS[key]

    def sglang_version(self, install: str | None = None) -> str | None:
        """The SGLang version of an install."""
        if self.is_sim:
            version = self.sim_facts(install).get("sglang_version")
            return version if isinstance(version, str) else None
        python = python_for(self.config, install)
        return facts.parse_version(self.sh(facts.sglang_version_command(quote(python)), timeout=120).text)

    def packages(self, install: str | None = None) -> dict[str, str]:
        """Versions of the packages that decide SGLang's behaviour."""
        if self.is_sim:
            packages = self.sim_facts(install).get("packages", {})
            return dict(packages) if isinstance(packages, dict) else {}
        python = python_for(self.config, install)
        return facts.parse_packages(self.sh(f"{quote(python)} {facts.PIP_LIST}", timeout=120).text)

    def sim_facts(self, install: str | None = None) -> dict[str, str | dict[str, str]]:
        """What the simulated host reports as installed (its scenario's version and packages)."""
        words = [*self.launcher_words(install), "--host-facts"]
        out = self.sh(" ".join(quote(w) for w in words), timeout=60).text
        data: dict[str, str | dict[str, str]] = json.loads(out or "{}")
        return data

    def host_facts(self) -> dict[str, str]:
        """GPU model, driver and compute capability, as nvidia-smi says."""
        info = facts.parse_driver(self.sh(facts.DRIVER_QUERY, timeout=30).text)
        info["gpus"] = str(self.config.gpus)
        return info

    def gpu_holders(self, our_pgids: set[int]) -> list[facts.GpuHolder]:
        """Every process holding GPU memory, marked ours when it belongs to one of our launches."""
        gpus = facts.parse_gpus(self.sh(facts.GPU_QUERY, timeout=30).text)
        procs = facts.parse_gpu_processes(self.sh(facts.GPU_APPS_QUERY, timeout=30).text)
        ours: set[int] = set()
        if our_pgids:
            table = self.sh("ps -eo pid=,pgid=", timeout=30).text
            for row in table.splitlines():
                parts = row.split()
                if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) in our_pgids:
                    ours.add(int(parts[0]))
        return facts.gpu_holders(gpus, procs, ours)

    def wait_gpus_released(self, gpus: tuple[int, ...], timeout: float) -> tuple[bool, list[facts.GpuHolder]]:
        """Wait until nvidia-smi shows no process on these GPUs; the holders left if it never does."""
        deadline = time.monotonic() + timeout
        while True:
            holders = [h for h in self.gpu_holders(set()) if h.gpu_index in gpus]
            if not holders:
                return True, []
            if time.monotonic() >= deadline:
                return False, holders
            time.sleep(0.1)

    def port_owner(self, port: int, pgid: int) -> str:
        """Who listens on a port of the host: "ours" (the launch's process group), "foreign", "none" or "unknown"."""
        script = quote(_LISTENER_SCRIPT)
        out = self.sh(f"{quote(self.config.python)} -c {script} {port} {pgid}", timeout=30).text.strip()
        return out if out in ("ours", "foreign", "none") else "unknown"

    def free_port(self, avoid: set[int]) -> int:
        """A port free on the host and at least PORT_SPACING away from every port in `avoid`."""
        base = self.config.port_base
        candidates = [
            p for p in range(base, 65000 - PORT_SPACING, PORT_SPACING) if all(abs(p - q) >= PORT_SPACING for q in avoid)
        ][:16]
        script = quote(_FREE_PORTS_SCRIPT)
        python = quote(self.config.python)
        out = self.sh(f"{python} -c {script} " + " ".join(map(str, candidates)), timeout=30).text.strip()
        if not out.isdigit():
            raise HostBusy(f"no free port on {self.config.name} among {candidates}")
        return int(out)

    def probe_client(self, port: int) -> ProbeClient:
        """An HTTP client for a server on the host's loopback (through SSH when the host is remote)."""
        # Imported here: paramiko costs every command ~0.3 s at import, and local hosts never need it.
        from orchestrator.transport.ssh import SshTransport
        from orchestrator.transport.tunnel import TunnelTransport

        http = TunnelTransport(self.transport.open_channel) if isinstance(self.transport, SshTransport) else None
        return ProbeClient(f"http://127.0.0.1:{port}", transport=http)

    def run_dir(self, run_id: str) -> str:
        """Where a run's files live on the host."""
        return posixpath.join(self.workdir, "runs", run_id)


def transport_spec(config: HostConfig) -> Literal["local"] | SshTarget:
    """What `open_transport` needs to reach a host."""
    if config.transport in ("local", "sim"):
        return "local"
    if not config.host:
        raise LaunchError(f"host {config.name!r} has transport ssh but no ssh target")
    return SshTarget(
        host=config.host,
        port=config.port,
        user=config.user,
        key_filename=config.identity_file,
        known_hosts=config.known_hosts,
        accept_new_host_keys=config.accept_new_host_keys,
    )


def absolute_scenario(words: list[str]) -> list[str]:
    """A simulated launcher with its `--scenario` made absolute: launches start in their run directory."""
    # The simulated host is this machine, so a relative path means the orchestrator's working directory.
    out = list(words)
    for i, word in enumerate(out):
        if word == "--scenario" and i + 1 < len(out):
            out[i + 1] = str(Path(out[i + 1]).expanduser().resolve())
        elif word.startswith("--scenario="):
            out[i] = "--scenario=" + str(Path(word.split("=", 1)[1]).expanduser().resolve())
    return out


def python_for(config: HostConfig, install: str | None) -> str:
    """The interpreter of an install: the launcher's own when it starts with one, else the host's."""
    words = shlex.split(config.launcher_for(install))
    if words and "python" in posixpath.basename(words[0]):
        return words[0]
    return config.python
