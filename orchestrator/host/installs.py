"""The launcher seam: how a host's SGLang installs are started, and the environment every host command gets.

A real host's install is its launcher command (`/opt/sglang/.venv/bin/python -m sglang.launch_server`). The
simulated host gets installs that look the same from outside: a `python` on the host (under its workdir) whose
`-m sglang.launch_server` is the simulated server, whose `import sglang` reports the scenario's release and whose
`-m pip list` the scenario's packages, with a fake `nvidia-smi` on the PATH. So preflight runs the real commands
and the real parsers on both; the decision "simulated or not" is taken here, once per host, and nowhere else.
"""

from __future__ import annotations

import posixpath
import shlex
import sys
import threading
from pathlib import Path
from typing import Protocol

from orchestrator.config.model import HostConfig
from orchestrator.transport.base import Transport
from orchestrator.transport.shell import quote

SIM_ROOT = Path(__file__).resolve().parents[1] / "sim"
SIM_BIN = SIM_ROOT / "bin"
"""The simulated host's tools (nvidia-smi), put first on its PATH."""
SIM_SITE = SIM_ROOT / "site"
"""The simulated `sglang` and `pip` packages, first on the path of a simulated install's python."""
SIM_MODULE = "orchestrator.sim"
_WRITING = threading.Lock()
"""Held while an install's python is checked and written: a sweep opens a session per cell worker."""


class Installs(Protocol):
    """What the host session asks of a host's installs."""

    def env(self, workdir: str) -> dict[str, str]:
        """Environment every command and launch on the host gets, on top of the host's own."""
        ...

    def launcher(self, install: str | None, workdir: str) -> list[str]:
        """The words that start SGLang for an install (before its flags)."""
        ...


class RealInstalls:
    """A host's installs as hosts.yaml gives them."""

    def __init__(self, config: HostConfig):
        self.config = config

    def env(self, workdir: str) -> dict[str, str]:
        """Nothing added."""
        return {}

    def launcher(self, install: str | None, workdir: str) -> list[str]:
        """The install's launcher command."""
        return shlex.split(self.config.launcher_for(install))


class SimulatedInstalls:
    """The simulated host's installs: a python per install on the host, in front of the simulated server."""

    def __init__(self, config: HostConfig, transport: Transport):
        self.config = config
        self.transport = transport
        self._written: dict[str | None, list[str]] = {}

    def env(self, workdir: str) -> dict[str, str]:
        """Where the fake nvidia-smi and its GPU state live."""
        path = self.config.env.get("PATH")
        return {
            "ORCH_SIM_GPU_STATE": posixpath.join(workdir, "gpu-state"),
            "ORCH_SIM_GPUS": str(self.config.gpus),
            "PATH": f"{SIM_BIN}:{path if isinstance(path, str) else '/usr/local/bin:/usr/bin:/bin'}",
        }

    def launcher(self, install: str | None, workdir: str) -> list[str]:
        """`<workdir>/sim-installs/<install>/bin/python -m sglang.launch_server`, its python written on first use."""
        if install not in self._written:
            words = absolute_scenario(self._given(install))
            if SIM_MODULE not in words:
                self._written[install] = words  # an install that is not the simulator: launched as given
            else:
                python, scenario, rest = _split_sim_launcher(words, self.config.scenario)
                path = posixpath.join(workdir, "sim-installs", install or "_host", "bin", "python")
                _ensure_file(self.transport, path, install_python(python, scenario))
                self._written[install] = [path, "-m", "sglang.launch_server", *rest]
        return self._written[install]

    def _given(self, install: str | None) -> list[str]:
        if install is not None:
            return shlex.split(self.config.launcher_for(install))
        words = shlex.split(self.config.launcher)
        if SIM_MODULE in words:
            return words
        # The built-in sim, or a host whose launcher is left at SGLang's default: this process's simulator.
        scenario = ["--scenario", self.config.scenario] if self.config.scenario else []
        return [sys.executable, "-m", SIM_MODULE, *scenario]


def host_installs(config: HostConfig, transport: Transport) -> Installs:
    """The launcher seam of a host: simulated when its transport is `sim` or it names a scenario."""
    if config.transport == "sim" or config.scenario is not None:
        return SimulatedInstalls(config, transport)
    return RealInstalls(config)


def _ensure_file(transport: Transport, path: str, content: str) -> None:
    """Write the executable `path` only when it does not already hold `content`.

    Never rewritten under a launch: while any process holds a file open for writing, exec of it fails with
    ETXTBSY ("Text file busy"), and a subprocess forked by another thread at that moment inherits the writer's
    descriptor until its own exec. A sweep's worker sessions (and a resumed sweep beside running cells) each
    ask for the same install, so only the first one that finds it missing or different writes it.
    """
    with _WRITING:
        if transport.read_range(path, 0) != content.encode():
            transport.write_file(path, content, mode=0o755)


def install_python(python: str, scenario: str | None) -> str:
    """A simulated install's `python`: the real interpreter with the simulated sglang and pip first on its path."""
    lines = [
        "#!/bin/sh",
        "# A simulated SGLang install (orchestrator/host/installs.py): python -m sglang.launch_server, import sglang",
        "# and python -m pip list answer as a real install's do, from the scenario below.",
        f"PYTHONPATH={quote(str(SIM_SITE))}${{PYTHONPATH:+:$PYTHONPATH}}",
        "export PYTHONPATH",
    ]
    if scenario:
        lines += [f"ORCH_SIM_SCENARIO={quote(scenario)}", "export ORCH_SIM_SCENARIO"]
    lines.append(f'exec {quote(python)} "$@"')
    return "\n".join(lines) + "\n"


def _split_sim_launcher(words: list[str], default: str | None) -> tuple[str, str | None, list[str]]:
    """`PY -m orchestrator.sim [--scenario F] ARGS` -> (PY, F or the host's, ARGS)."""
    at = words.index(SIM_MODULE)
    python, rest = words[0], [*words[1 : at - 1], *words[at + 1 :]]
    scenario = str(Path(default).expanduser().resolve()) if default else None
    out: list[str] = []
    i = 0
    while i < len(rest):
        if rest[i] == "--scenario" and i + 1 < len(rest):
            scenario, i = rest[i + 1], i + 2
            continue
        if rest[i].startswith("--scenario="):
            scenario = rest[i].split("=", 1)[1]
        else:
            out.append(rest[i])
        i += 1
    return python, scenario, out


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
