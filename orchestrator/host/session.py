"""A host as the sweep sees it: its connection, SGLang installs and facts, launcher, and placement (who picks each
launch's GPUs and port: the host's own GPUs, host/placement.py, or a batch scheduler's, slurm/placement.py).

Every host command goes through here, prefixed with the host's plain environment (for the
simulated host that is where the fake `nvidia-smi` and its GPU state live), so facts, launches
and probes all see the same machine.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import cached_property
from typing import Literal, TypeVar

import httpx

from orchestrator.config.hosts import resolve_host_env
from orchestrator.config.model import HostConfig
from orchestrator.errors import LaunchError
from orchestrator.host import facts
from orchestrator.host.installs import SIM_BIN as SIM_BIN
from orchestrator.host.installs import host_installs
from orchestrator.host.launcher import Launcher
from orchestrator.host.placement import LocalGpus, Placement
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help
from orchestrator.probe.client import ProbeClient
from orchestrator.transport import HostBreaker, open_transport
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.shell import quote
from orchestrator.transport.ssh_target import SshTarget

T = TypeVar("T")

_GRAMMARS: dict[tuple[str, str | None, tuple[str, ...]], FlagGrammar] = {}
"""Grammars read this process, per host, install and launcher: `--help` of a real install takes seconds."""


class HostSession:
    """One open connection to a host, with everything the sweep asks of it."""

    def __init__(self, config: HostConfig, transport: Transport):
        self.config = config
        self.transport = transport
        self.launcher = Launcher(transport)
        self.placement: Placement = LocalGpus(self)
        """Who picks each launch's GPUs and port: this host's own GPUs, unless Slurm's placement replaces it."""
        self.installs = host_installs(config, transport)
        """The launcher seam: real installs, or the simulated host's (host/installs.py)."""
        self._help: dict[str | None, Future[CommandResult]] = {}
        self._versions: dict[str | None, str | None] = {}
        self._owns_transport = True

    @classmethod
    def open(
        cls, config: HostConfig, breaker: HostBreaker | None = None, place: Callable[[HostSession], None] | None = None
    ) -> HostSession:
        """Connect to the host the config names; `breaker`: shared by a sweep's connections to the host; `place`:
        gives the session a batch scheduler's launcher and placement (sweep/connect.py picks it for a config)."""
        if config.transport == "slurm" and place is None:
            raise LaunchError(f"host {config.name} is a Slurm cluster: open it with sweep.connect.open_host")
        session = cls(config, open_transport(transport_spec(config), breaker))
        if place is not None:
            place(session)
        return session

    def sharing_connection(self) -> HostSession:
        """A session over this session's connection, for a worker thread (closing it leaves the connection to this
        one); its placement's `worker_session` gives it a placement."""
        twin = HostSession(self.config, self.transport)
        twin.installs = self.installs
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
        return self.exports + command

    @property
    def exports(self) -> str:
        """The host's plain environment as `export` commands."""
        return "".join(f"export {k}={quote(v)}; " for k, v in sorted(self.base_env.items()))

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

    def probe_client(self, port: int, api_key: str | None = None, node: str = "127.0.0.1") -> ProbeClient:
        """An HTTP client for a server on the host's loopback, or on `node` seen from the host (a batch job's node):
        through SSH when the host is remote."""
        # Imported here: paramiko costs every command ~0.3 s at import, and local hosts never need it.
        from orchestrator.transport.ssh import SshTransport
        from orchestrator.transport.tunnel import TunnelTransport

        http: httpx.BaseTransport
        if isinstance(self.transport, SshTransport):
            http = TunnelTransport(self.transport.open_channel)
        else:
            # Plain HTTP to loopback: verify=False skips loading the CA bundle (~20 ms per launch).
            http = httpx.HTTPTransport(verify=False)
        return ProbeClient(f"http://{node}:{port}", transport=http, api_key=api_key)

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
