"""Frozen results of loading a matrix file and a hosts file; what the core receives.

pydantic stays in config/schema.py. These are plain dataclasses so that the pure layers
(matrix expansion, launch planning) never import a validation library. A secret is held
only as a reference (the name of the orchestrator's own environment variable to read at
launch time), never as its value, because these objects are stored with every sweep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.model import DEFAULT_MAX_CELLS as DEFAULT_MAX_CELLS
from orchestrator.model import EnvValue as EnvValue
from orchestrator.model import Matrix as Matrix
from orchestrator.model import OnInfra as OnInfra
from orchestrator.secret import SecretRef as SecretRef
from orchestrator.secret import is_secret_name, masked_names
from orchestrator.settings import Deadlines

DEFAULT_LAUNCHER = "python -m sglang.launch_server"

Transport = Literal["ssh", "local", "sim", "slurm"]




looks_secret = is_secret_name
"""Whether an environment variable's name says it holds a secret (decided in orchestrator/secret.py)."""


def masked_env(env: Mapping[str, EnvValue], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """Names -> values safe to show or store: `***` for secrets and secret-looking names."""
    return masked_names(env, secret_names)


def resolve_env(
    env: Mapping[str, EnvValue], environ: Mapping[str, str], secret_names: Iterable[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """Split `env` into (plain, secret) name -> value, reading secret references from `environ`."""
    marked = set(secret_names)
    plain: dict[str, str] = {}
    secrets: dict[str, str] = {}
    missing: list[ConfigError] = []
    for name, value in env.items():
        if isinstance(value, SecretRef):
            if value.resolve(environ) is None:
                missing.append(
                    ConfigError(
                        f"environment variable {value.name} is not set; {name} reads its value from it",
                        fix=f"export {value.name}=... in the shell that runs the orchestrator",
                    )
                )
                continue
            secrets[name] = value.resolve(environ) or ""
        elif name in marked or is_secret_name(name):
            secrets[name] = value
        else:
            plain[name] = value
    if missing:
        raise ConfigErrors(missing)
    return plain, secrets


@dataclass(frozen=True)
class InstallConfig:
    """One SGLang install on a host: how to launch it and the environment it needs."""

    name: str
    launcher: str
    env: dict[str, EnvValue] = field(default_factory=dict)


@dataclass(frozen=True)
class SlurmConfig:
    """`slurm:` of a host with `transport: slurm`: where its jobs go, passed to sbatch as given."""

    partition: str
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    """The job's time limit in sbatch's syntax (`2:00:00`, `90`); the partition's default when None."""
    sbatch_args: tuple[str, ...] = ()
    """Further sbatch options, one word each (`--constraint=b200`, `--exclusive`)."""


@dataclass(frozen=True)
class HostConfig:
    """One entry of hosts.yaml: how to reach the host and how to launch SGLang on it."""

    name: str
    transport: Transport
    host: str | None = None
    """SSH host name, address or ~/.ssh/config alias (transport ssh only)."""
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False
    ssh_config: str = "~/.ssh/config"
    """The OpenSSH client config file that resolves `host` (relative paths: next to hosts.yaml)."""
    launcher: str = DEFAULT_LAUNCHER
    workdir: str = "~/orchestrator"
    """Run directories go below it: <workdir>/runs/<run_id>/."""
    gpus: int = 8
    env: dict[str, EnvValue] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    """Names in `env` to treat as secret although they are given literally."""
    installs: dict[str, InstallConfig] = field(default_factory=dict)
    deadlines: dict[str, float] = field(default_factory=dict)
    """Overrides of the default deadlines, in seconds; a matrix's own overrides win."""
    kill_foreign_gpu_holders: bool = False
    python: str = "python3"
    port_base: int = 30000
    scenario: str | None = None
    """Scenario file of a simulated host."""
    slurm: SlurmConfig | None = None
    """For `transport: slurm`: one job per launch; `host` (if any) is then the login node."""

    def launcher_for(self, install: str | None) -> str:
        """The launcher command for a cell's install (the host's own when None)."""
        return self._install(install).launcher if install else self.launcher

    def env_for(self, install: str | None) -> dict[str, EnvValue]:
        """The host's environment, with the install's on top."""
        return {**self.env, **(self._install(install).env if install else {})}

    def _install(self, name: str) -> InstallConfig:
        if name not in self.installs:
            known = ", ".join(sorted(self.installs)) or "none"
            raise ConfigError(
                f"host {self.name!r} has no install {name!r} (it has: {known})",
                fix=f"add installs: {{{name}: {{launcher: ...}}}} to host {self.name!r} in hosts.yaml",
            )
        return self.installs[name]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form with secrets masked (what a sweep stores)."""
        data = {k: v for k, v in vars(self).items() if k not in ("env", "installs", "slurm")}
        if self.slurm is not None:
            data["slurm"] = {**vars(self.slurm), "sbatch_args": list(self.slurm.sbatch_args)}
        data["secrets"] = list(self.secrets)
        data["env"] = masked_env(self.env, self.secrets)
        data["installs"] = {
            n: {"launcher": i.launcher, "env": masked_env(i.env, self.secrets)} for n, i in self.installs.items()
        }
        return data


def effective_deadlines(host: HostConfig, matrix: Matrix) -> Deadlines:
    """Defaults < the host's overrides < the matrix's overrides."""
    return Deadlines().with_overrides(host.deadlines).with_overrides(matrix.deadline_overrides)
