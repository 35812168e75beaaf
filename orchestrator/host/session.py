"""A host as the sweep sees it: its transport, launcher, GPUs, ports, SGLang installs and lock.

Every host command goes through here, prefixed with the host's plain environment (for the
simulated host that is where the fake `nvidia-smi` and its GPU state live), so facts, launches
and probes all see the same machine.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from functools import cached_property
from typing import Literal, TypeVar

import httpx

from orchestrator.config.hosts import resolve_host_env
from orchestrator.config.model import HostConfig
from orchestrator.errors import HostBusy, LaunchError
from orchestrator.host import facts
from orchestrator.host.installs import SIM_BIN as SIM_BIN
from orchestrator.host.installs import absolute_scenario as absolute_scenario
from orchestrator.host.installs import host_installs
from orchestrator.host.launcher import Launch, Launcher
from orchestrator.host.ports import PORT_SPACING as PORT_SPACING
from orchestrator.host.ports import (
    candidates,
    parse_survey,
    pick_free,
    spaced_from,
    survey_command,
)
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help
from orchestrator.probe.client import ProbeClient
from orchestrator.transport import HostBreaker, open_transport
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.shell import quote
from orchestrator.transport.ssh_target import SshTarget

GPU_RELEASE_POLL_S = 0.05
_GPU_AND_DRIVER_QUERY = (
    "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,name,driver_version,compute_cap"
    " --format=csv,noheader,nounits"
)
T = TypeVar("T")



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


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """nvidia-smi's list of GPU processes, and when it was asked for (a GPU is never thought free later than it was)."""

    result: CommandResult
    asked: float


class HostSession:
    """One open connection to a host, with everything the sweep asks of it."""

    schedules_gpus = False
    """Whether a batch scheduler (Slurm) picks each launch's GPUs and node, so the sweep packs nothing itself."""

    def __init__(self, config: HostConfig, transport: Transport):
        self.config = config
        self.transport = transport
        self.launcher = Launcher(transport)
        self.installs = host_installs(config, transport)
        """The launcher seam: real installs, or the simulated host's (host/installs.py)."""
        self._help: dict[str | None, Future[CommandResult]] = {}
        self._versions: dict[str | None, str | None] = {}
        self._owns_transport = True
        self.gpus: list[facts.Gpu] = []
        """GPU index and UUID, as nvidia-smi listed them (shared with this session's worker sessions)."""
        self.free_seen: dict[int, float] = {}
        """GPU index -> when (time.monotonic) nvidia-smi last showed no process on it through this session."""

    @classmethod
    def open(cls, config: HostConfig, breaker: HostBreaker | None = None) -> HostSession:
        """Connect to the host the config names; `breaker`: shared by a sweep's connections to the host.

        A Slurm cluster's session is slurm.session.SlurmSession (sweep/connect.py picks the kind of a config).
        """
        if (config.transport == "slurm") != cls.schedules_gpus:
            kind = "a Slurm cluster" if config.transport == "slurm" else "not a Slurm cluster"
            raise LaunchError(f"host {config.name} is {kind}: open it with orchestrator.sweep.connect.open_host")
        return cls(config, open_transport(transport_spec(config), breaker))

    def for_worker(self, breaker: HostBreaker | None = None) -> HostSession:
        """A session for one more worker thread of this sweep, over this session's connection: a channel per
        command, not a connection per worker (sshd allows 10 sessions on one, more than a host's cells in flight
        ask at once). Closing it leaves the connection to this session."""
        twin = HostSession(self.config, self.transport)
        twin.installs = self.installs
        twin.gpus = self.gpus
        twin._owns_transport = False
        for name in ("workdir", "base_env"):  # asked of the host once, the same for every worker
            if name in self.__dict__:
                twin.__dict__[name] = self.__dict__[name]
        return twin

    def close(self) -> None:
        """Close the connection (launches keep running: they are detached); a worker's session leaves it open."""
        if self._owns_transport:
            self.transport.close()

    @cached_property
    def workdir(self) -> str:
        """The host's working directory, absolute, created if missing."""
        raw = self.config.workdir
        target = f'"$HOME"/{quote(raw[2:])}' if raw.startswith("~/") else quote(raw)
        # Not through sh(): the simulated host's environment (its nvidia-smi state) lives under this directory.
        result = self.transport.run(f"mkdir -p {target} && cd {target} && pwd", timeout=30)
        if result.exit_code != 0:
            raise LaunchError(f"cannot create the working directory {raw} on {self.config.name}: {result.stderr_text}")
        return result.text.strip()

    @cached_property
    def base_env(self) -> dict[str, str]:
        """The plain environment every host command and launch gets."""
        env, _ = resolve_host_env(self.config, self.config.env, os.environ)
        seam = self.installs.env(self.workdir)
        # The host's own settings win, but the seam's PATH (the fake nvidia-smi first) is the one that holds.
        return {**seam, **env, **({"PATH": seam["PATH"]} if "PATH" in seam else {})}

    def sh(self, command: str, timeout: float = 60.0) -> CommandResult:
        """Run a command on the host with the host's environment."""
        return self.transport.run(self.with_env(command), timeout=timeout)

    def with_env(self, command: str) -> str:
        """`command` with the host's environment exported before it."""
        return "".join(f"export {k}={quote(v)}; " for k, v in sorted(self.base_env.items())) + command

    def launcher_words(self, install: str | None = None) -> list[str]:
        """The command that starts SGLang for an install (before its flags)."""
        return self.installs.launcher(install, self.workdir)

    def prefetch_help(self, install: str | None = None) -> None:
        """Start reading an install's `--help` in the background, to overlap the other slow facts of preflight."""
        key = (self.config.name, install, tuple(self.launcher_words(install)))
        if key not in _GRAMMARS and install not in self._help:
            self._help[install] = _in_background(lambda: self.sh(self._help_command(install), timeout=300))

    def _help_command(self, install: str | None) -> str:
        # stderr kept apart, not dropped: a wrong launcher path says why (`sh: 1: /opt/x/python: not found`).
        return "COLUMNS=200 " + " ".join(quote(w) for w in [*self.launcher_words(install), "--help"])

    def grammar(self, install: str | None = None) -> FlagGrammar:
        """The flag grammar of an install, read from its real `--help` output (cached)."""
        key = (self.config.name, install, tuple(self.launcher_words(install)))
        if key not in _GRAMMARS:
            words = self.launcher_words(install)
            # Asked before the help job is taken: asked after, it would start a second `--help` nobody waits for.
            version = self.sglang_version(install)
            job = self._help.pop(install, None)
            result = job.result() if job is not None else self.sh(self._help_command(install), timeout=300)
            if "usage:" not in result.text:
                said = " ".join((result.stderr_text or result.text or "nothing").split())[-400:]
                which = f"installs.{install}.launcher" if install else "launcher"
                raise LaunchError(
                    f"`{' '.join(words)} --help` on {self.config.name} printed no usage (exit {result.exit_code}): "
                    f"{said} (fix: set `{which}:` of host {self.config.name} in hosts.yaml to the command that "
                    "starts SGLang's server there, e.g. /opt/sglang/.venv/bin/python -m sglang.launch_server)"
                )
            _GRAMMARS[key] = parse_help(result.text, version)
        return _GRAMMARS[key]

    def sglang_version(self, install: str | None = None) -> str | None:
        """The SGLang version of an install (and the start of reading its `--help`, which preflight needs next)."""
        if install in self._versions:  # asked by preflight, then again for the grammar
            return self._versions[install]
        # Each of these starts SGLang's Python (seconds on a real host, with its imports): overlap them.
        self.prefetch_help(install)
        words = self.launcher_words(install)
        python = python_for(self.config, words)
        cli = quote(words[0]) if words and posixpath.basename(words[0]) == "sglang" else None
        found = facts.parse_version(self.sh(facts.sglang_version_command(quote(python), cli), timeout=120).text)
        # Never "sglang unknown" while pip can say: the interpreter may lack importlib metadata for a checkout.
        self._versions[install] = found or self.packages(install).get("sglang")
        return self._versions[install]

    def packages(self, install: str | None = None) -> dict[str, str]:
        """Versions of the packages that decide SGLang's behaviour."""
        python = python_for(self.config, self.launcher_words(install))
        return facts.parse_packages(self.sh(f"{quote(python)} {facts.PIP_LIST}", timeout=120).text)

    def host_facts(self) -> dict[str, str]:
        """GPU model, driver and compute capability, as nvidia-smi says."""
        # One nvidia-smi start for these and the GPUs' index and UUID, which gpu_holders needs next.
        rows = self.sh(_GPU_AND_DRIVER_QUERY, timeout=30).text.splitlines()
        self.gpus = facts.parse_gpus("\n".join(rows))
        info = facts.parse_driver("\n".join(",".join(row.split(",")[4:]) for row in rows))
        info["gpus"] = str(self.config.gpus)
        return info

    def stop_launch(self, launch: Launch, grace_s: float) -> tuple[bool, GpuReading | None]:
        """Stop a launch's process group (True: SIGKILL was needed) and, in the same round trip, read which
        processes hold GPUs once it is gone: the first look of `wait_gpus_released`."""
        asked = time.monotonic()
        stopped = self.launcher.stop(launch, grace_s, then=self.with_env(facts.GPU_APPS_QUERY))
        return stopped.sigkilled, GpuReading(stopped.after, asked) if stopped.after is not None else None

    def gpu_holders(
        self, our_pgids: set[int], gpus: Collection[int] | None = None, reading: GpuReading | None = None
    ) -> list[facts.GpuHolder]:
        """Processes holding memory on `gpus` (default: any GPU), marked ours when in one of our launches' groups;
        `reading`: nvidia-smi's answer already in hand (from `stop_launch`)."""
        # One nvidia-smi per call: it is slow to start (a real one often 0.1-0.5 s), and this runs before
        # and after every launch. The process table is read only when there are holders to tell apart.
        if reading is None:
            asked = time.monotonic()  # taken before the query, so a GPU is never thought free later than it was
            reading = GpuReading(self.sh(facts.GPU_APPS_QUERY, timeout=30), asked)
        asked = reading.asked
        # No reading (nvidia-smi missing or failing) is never "no holders": NoGpuReading says why.
        procs = facts.read_gpu_processes(reading.result.exit_code, reading.result.text, reading.result.stderr_text)
        known = self._gpu_list(procs)
        holders = facts.gpu_holders(known, procs, set())
        busy = {h.gpu_index for h in holders}
        for gpu in known:
            if gpu.index not in busy and (gpus is None or gpu.index in gpus):
                self.free_seen[gpu.index] = asked
        if gpus is not None:
            holders = [h for h in holders if h.gpu_index in gpus]
        if not holders or not our_pgids:
            return holders
        ours: set[int] = set()
        for row in self.sh("ps -eo pid=,pgid=", timeout=30).text.splitlines():
            parts = row.split()
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) in our_pgids:
                ours.add(int(parts[0]))
        return [dataclasses.replace(h, ours=h.pid in ours) for h in holders]

    def gpu_uuids(self) -> list[str]:
        """The UUIDs of the GPUs this host entry uses (its first `gpus:`), for the machine-wide lock; empty when
        nvidia-smi lists none (a Slurm login node, or a host preflight is about to refuse, saying why)."""
        if self.schedules_gpus:
            return []
        result = self.sh(facts.GPU_QUERY, timeout=30)
        if result.exit_code != 0:
            return []
        self.gpus = facts.parse_gpus(result.text)
        return [g.uuid for g in sorted(self.gpus, key=lambda g: g.index)[: self.config.gpus]]

    def _gpu_list(self, procs: list[facts.GpuProcess]) -> list[facts.Gpu]:
        # GPU index <-> UUID is fixed while the host is up; read again when a process names a UUID not in it.
        known = {g.uuid for g in self.gpus}
        if not self.gpus or any(p.gpu_uuid not in known for p in procs):
            self.gpus = facts.parse_gpus(self.sh(facts.GPU_QUERY, timeout=30).text)
        return self.gpus

    def wait_gpus_released(
        self, gpus: tuple[int, ...], timeout: float, first: GpuReading | None = None
    ) -> tuple[bool, list[facts.GpuHolder]]:
        """Wait until nvidia-smi shows no process on these GPUs (`first`: its answer already in hand); the holders
        left if it never does. Raises NoGpuReading when nvidia-smi gave no reading until the deadline: GPUs
        whose state is unknown are never called free."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                holders = self.gpu_holders(set(), gpus, first)
            except facts.NoGpuReading:
                if time.monotonic() >= deadline:
                    raise
                holders = None
            first = None
            if holders == []:
                return True, []
            if holders is not None and time.monotonic() >= deadline:
                return False, holders
            time.sleep(GPU_RELEASE_POLL_S)

    def port_owner(self, port: int, pgid: int) -> str:
        """Who listens on a port of the host: "ours" (the launch's process group), "foreign", "none" or "unknown"."""
        script = quote(_LISTENER_SCRIPT)
        # -S: no site-packages scan; the script needs only the standard library, and it runs for every launch.
        out = self.sh(f"{quote(self.config.python)} -S -c {script} {port} {pgid}", timeout=30).text.strip()
        return out if out in ("ours", "foreign", "none") else "unknown"

    def free_ports(self, count: int, avoid: Collection[int]) -> list[int]:
        """`count` ports free on the host, PORT_SPACING apart from each other and from every port in `avoid`.

        The host's sockets are surveyed at every call (one command): a port picked from an older look may have
        been taken since, by another sweep on the same machine or a server that came up in between.
        """
        grid = candidates(self.config.port_base)
        ports = pick_free(parse_survey(self.sh(survey_command(grid), timeout=30).text), grid, count, avoid)
        if len(ports) < count:
            among = spaced_from(grid, avoid)
            raise HostBusy(f"only {len(ports)} of {count} ports free on {self.config.name} among {among}")
        return ports

    def free_port(self, avoid: Collection[int]) -> int:
        """A port free on the host and at least PORT_SPACING away from every port in `avoid`."""
        return self.free_ports(1, avoid)[0]

    def probe_client(self, port: int, api_key: str | None = None) -> ProbeClient:
        """An HTTP client for a server on the host's loopback (through SSH when the host is remote)."""
        # Imported here: paramiko costs every command ~0.3 s at import, and local hosts never need it.
        from orchestrator.transport.ssh import SshTransport
        from orchestrator.transport.tunnel import TunnelTransport

        http: httpx.BaseTransport
        if isinstance(self.transport, SshTransport):
            http = TunnelTransport(self.transport.open_channel)
        else:
            # Plain HTTP to loopback: verify=False skips loading the CA bundle (~20 ms per launch).
            http = httpx.HTTPTransport(verify=False)
        return ProbeClient(f"http://127.0.0.1:{port}", transport=http, api_key=api_key)

    def queue_ahead(self, jobs: int) -> int:
        """How many of `jobs` a batch scheduler's host has submitted at once, unless told (--max-queued)."""
        return jobs

    def launch_client(self, launch: Launch) -> ProbeClient:
        """An HTTP client for a started launch's server."""
        return self.probe_client(launch.spec.port, api_key=launch.api_key)

    def run_dir(self, run_id: str) -> str:
        """Where a run's files live on the host."""
        return posixpath.join(self.workdir, "runs", run_id)


def _in_background(work: Callable[[], T]) -> Future[T]:
    """Run `work` in a daemon thread (never holding up the exit of a command that no longer needs it)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to whoever asks for the result
            future.set_exception(exc)

    threading.Thread(target=run, name="host-facts", daemon=True).start()
    return future


def transport_spec(config: HostConfig) -> Literal["local"] | SshTarget:
    """What `open_transport` needs to reach a host."""
    if config.transport in ("local", "sim") or (config.transport == "slurm" and not config.host):
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
        ssh_config_path=config.ssh_config,
    )


def python_for(config: HostConfig, words: list[str]) -> str:
    """The interpreter of an install (its launcher words given): the launcher's own when it starts with one."""
    if words and "python" in posixpath.basename(words[0]):
        return words[0]
    if words and posixpath.basename(words[0]) == "sglang" and "/" in words[0]:
        # A venv's console script (`/opt/sglang/bin/sglang serve`): that venv's interpreter sits beside it.
        return posixpath.join(posixpath.dirname(words[0]), "python")
    return config.python
