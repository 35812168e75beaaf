"""Load hosts.yaml into frozen `HostConfig`s; `builtin_sim_host` is `--host sim` without one.

Each host is validated on its own, so one broken entry does not hide the problems of
the others, and every problem of the file is reported at once with its line.
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.config.checks import (
    DEADLINE_NAMES,
    as_mapping,
    env_names,
    known_keys,
    nul_bytes,
    shell_references,
)
from orchestrator.config.diagnostics import dotted, error_at, from_pydantic
from orchestrator.config.model import (
    DEFAULT_LAUNCHER,
    EnvValue,
    HostConfig,
    InstallConfig,
    SecretRef,
    SlurmConfig,
    Transport,
    resolve_env,
)
from orchestrator.config.schema import HostEntry, InstallEntry, SlurmEntry
from orchestrator.config.yamlpos import LoadedYaml, YamlPath, load_yaml
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.transport.ssh_target import note_origin

HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SSH = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]\s]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?$")
_PORT = re.compile(r"(?<!:)(?:\]|[^:\]\[]):([^:\]]*)$")
"""What follows the one colon of `host:port` (not an IPv6 address's colons)."""
_SSH_ONLY = ("known_hosts", "identity_file", "accept_new_host_keys", "ssh_config")

SIM_LAUNCHER = f"{shlex.quote(sys.executable)} -m orchestrator.sim"
SIM_WORKDIR = str(Path(tempfile.gettempdir()) / "orchestrator-sim")
SIM_DEADLINES: dict[str, float] = {
    "model_load": 20.0,
    "memory_alloc": 10.0,
    "cuda_graph_capture": 10.0,
    "ready": 40.0,
    "probe": 15.0,
    "stop_grace": 3.0,
    "gpu_release": 10.0,
}
"""The simulated host starts in seconds, so a stuck phase should be cut in seconds too."""


def builtin_sim_host(scenario: str | None = None) -> HostConfig:
    """The simulated 8-GPU host behind `--host sim` when hosts.yaml defines no `sim`."""
    return HostConfig(
        name="sim",
        transport="sim",
        launcher=SIM_LAUNCHER,
        workdir=SIM_WORKDIR,
        gpus=8,
        deadlines=dict(SIM_DEADLINES),
        python=sys.executable,
        scenario=str(Path(scenario).expanduser().resolve()) if scenario else None,
    )


def _host_keys(section: YamlPath) -> list[str]:
    if len(section) == 1:
        return list(HostEntry.model_fields)
    if len(section) == 2 and section[1] == "slurm":
        return list(SlurmEntry.model_fields)
    return list(InstallEntry.model_fields) if len(section) == 3 and section[1] == "installs" else []


DEFAULT_HOSTS_FILES = (Path("configs/hosts.yaml"), Path("~/.config/orchestrator/hosts.yaml"))
"""Where hosts.yaml is looked for when neither --hosts nor $ORCHESTRATOR_HOSTS names one."""


def locate_hosts_file(explicit: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The hosts.yaml to read: `--hosts FILE`, else $ORCHESTRATOR_HOSTS, else the first default that exists.

    A file the user named (either way) must exist: silently reading another one instead would run the night on
    hosts nobody meant. None when no default exists either (only `--host sim` works then).
    """
    named = environ.get("ORCHESTRATOR_HOSTS")
    for path, how in ((explicit, "--hosts"), (Path(named).expanduser() if named else None, "$ORCHESTRATOR_HOSTS")):
        if path is None:
            continue
        if not path.exists():
            where = "" if path.is_absolute() else f" (relative to the current directory, {Path.cwd()})"
            fix = f"give {how} the path of an existing hosts.yaml" + (
                ", or unset ORCHESTRATOR_HOSTS to use configs/hosts.yaml" if how.startswith("$") else ""
            )
            raise ConfigError(f"{how} names {path}, which does not exist{where}", file=str(path), fix=fix)
        if path.is_dir():
            raise ConfigError(f"{how} names {path}, which is a folder", file=str(path), fix="name the hosts.yaml in it")
        return path
    return next((p for p in (d.expanduser() for d in DEFAULT_HOSTS_FILES) if p.exists()), None)


_ENV_LINES: dict[tuple[str, str], tuple[str, int]] = {}
"""(host, env name) -> the hosts.yaml file and line that set it (the install's line where an install sets it)."""


def resolve_host_env(
    host: HostConfig, env: Mapping[str, EnvValue], environ: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """`resolve_env` for one of `host`'s environments, an unset secret variable named with its hosts.yaml line."""
    missing = []
    for name, value in env.items():
        if isinstance(value, SecretRef) and value.resolve(environ) is None:
            file, line = _ENV_LINES.get((host.name, name), (None, None))
            missing.append(
                ConfigError(
                    f"environment variable {value.name} is not set; {name} of host {host.name!r} reads its value "
                    "from it (a secret: never written to hosts.yaml)",
                    file=file, line=line,
                    fix=f"export {value.name}=... in the shell that runs the orchestrator",
                )
            )  # fmt: skip
    if missing:
        raise ConfigErrors(missing)
    return resolve_env(env, environ, host.secrets)


def load_hosts(path: str | Path) -> dict[str, HostConfig]:
    """Read and validate hosts.yaml (name -> host); raises ConfigErrors listing every problem."""
    doc = load_yaml(path)
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        raise error_at(doc, (), "expected a mapping of host name -> settings", "start with `myhost: {ssh: user@host}`")
    errors: list[ConfigError] = []
    hosts: dict[str, HostConfig] = {}
    for name, raw in doc.data.items():
        if not HOST_NAME.match(str(name)):
            errors.append(error_at(doc, (name,), f"{name!r} is not a host name", "use letters, digits, '.', '_', '-'"))
            continue
        if _is_group(raw):
            errors += _group_errors(doc, str(name), raw)
            continue
        raw = raw if raw is not None else {}
        errors += _raw_checks(doc, str(name), raw)
        try:
            entry = HostEntry.model_validate(raw)
        except ValidationError as exc:
            errors += from_pydantic(exc, doc, _host_keys, prefix=(name,))
            continue
        problems, host = _host(doc, str(name), entry)
        errors += problems
        if host is not None:
            hosts[str(name)] = host
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: e.line or 0))
    return hosts


def load_groups(path: str | Path) -> dict[str, list[str]]:
    """The host groups of hosts.yaml (`pool: {group: [a, b]}`): name -> host names; load_hosts checks them."""
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        return {}
    return {str(n): [str(h) for h in raw["group"]] for n, raw in doc.data.items() if _is_group(raw)}


def _is_group(raw: object) -> bool:
    return isinstance(raw, dict) and "group" in raw


def _group_errors(doc: LoadedYaml, name: str, raw: dict[str, Any]) -> list[ConfigError]:
    """A group names two or more hosts of the same file (not other groups), and nothing else."""
    errors = [
        error_at(doc, (name, key), f"unknown key {key!r} in host group {name!r}", "a group has only `group: [a, b]`")
        for key in raw
        if key != "group"
    ]
    members = raw["group"]
    if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
        fix = "write `group: [host-a, host-b]` with hosts defined in this file"
        return [*errors, error_at(doc, (name, "group"), f"group {name!r} is not a list of host names", fix)]
    data: dict[Any, Any] = doc.data
    for index, member in enumerate(members):
        if member not in data or _is_group(data[member]):
            hosts = ", ".join(str(n) for n, r in data.items() if not _is_group(r)) or "none"
            message = f"group {name!r} names {member!r}, which is not a host of this file (hosts: {hosts})"
            errors.append(error_at(doc, (name, "group", index), message, "fix the name, or add that host"))
    if len(set(members)) != len(members):
        errors.append(error_at(doc, (name, "group"), f"group {name!r} names a host twice", "name each host once"))
    return errors


def _raw_checks(doc: LoadedYaml, name: str, raw: object) -> list[ConfigError]:
    """Checks that need no valid shape, so that they run even where pydantic found errors."""
    if not isinstance(raw, dict):
        return []
    at: YamlPath = (name,)
    envs: dict[YamlPath, dict[Any, Any]] = {(*at, "env"): as_mapping(raw.get("env"))}
    for install, spec in as_mapping(raw.get("installs")).items():
        path: YamlPath = (*at, "installs", install, "env")
        envs[path] = as_mapping(as_mapping(spec).get("env"))
    errors = [error for path, env in envs.items() for error in env_names(doc, path, env)]
    errors += [error for path, env in envs.items() for error in shell_references(doc, path, env, "env")]
    errors += known_keys(doc, (*at, "deadlines"), raw.get("deadlines"), DEADLINE_NAMES)
    errors += nul_bytes(doc, at, raw)
    errors += _surrogates(doc, at, raw)
    launchers: list[YamlPath] = [(*at, "launcher")]
    launchers += [(*at, "installs", i, "launcher") for i in as_mapping(raw.get("installs"))]
    for path in launchers:
        given = as_mapping(as_mapping(raw.get("installs")).get(path[2])) if len(path) > 2 else raw
        if isinstance(given.get("launcher"), str) and not given["launcher"].strip():
            fix = "write the command that starts SGLang there, e.g. `launcher: /opt/sglang/.venv/bin/python -m "
            fix += "sglang.launch_server`, or remove the key for `python -m sglang.launch_server` on the PATH"
            errors.append(error_at(doc, path, "launcher is empty", fix))
    declared = set().union(*envs.values())
    secrets = raw.get("secrets")
    for index, secret in enumerate(secrets if isinstance(secrets, list) else []):
        if secret not in declared:
            message = f"secrets lists {secret!r}, which no env of host {name!r} sets"
            errors.append(error_at(doc, (*at, "secrets", index), message, "add it to env:, or fix the name"))
    return errors


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogates(doc: LoadedYaml, path: YamlPath, value: object, depth: int = 4) -> list[ConfigError]:
    """Errors for text (keys included) holding a lone UTF-16 surrogate, which no host name, path or argument can be
    encoded with: a JSON-style `\\ud83d\\ude00` pair is two of them in YAML, not one character."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        if found is None:
            return []
        code = f"\\u{ord(found.group()):04x}"
        shown = dotted(path).encode("utf-8", "backslashreplace").decode()  # printable, whatever the key holds
        message = f"{shown} contains {code}, half of a UTF-16 surrogate pair, which is not a character"
        fix = "write the character itself, or one \\UXXXXXXXX escape (YAML does not join \\uD83D\\uDE00 pairs)"
        return [error_at(doc, path, message, fix)]
    # Bounded, as nul_bytes is: aliases can nest a small file into billions of values.
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    errors = []
    for key, item in items:
        if isinstance(key, str) and _SURROGATE.search(key):
            errors += _surrogates(doc, (*path, key), key, 0)
        elif depth > 0:
            errors += _surrogates(doc, (*path, key), item, depth - 1)
    return errors


def _host(doc: LoadedYaml, name: str, entry: HostEntry) -> tuple[list[ConfigError], HostConfig | None]:
    at: YamlPath = (name,)
    errors: list[ConfigError] = []
    reach_errors, reach = _reach(doc, at, entry)
    errors += reach_errors
    sim = reach is not None and reach[0] == "sim"
    launcher = entry.launcher or (SIM_LAUNCHER if sim else DEFAULT_LAUNCHER)
    scenario_errors, scenario = _scenario(doc, at, entry.scenario, launcher)
    errors += scenario_errors
    slurm_errors, slurm = _slurm(doc, at, entry, reach[0] if reach else None)
    errors += slurm_errors
    if errors or reach is None:
        return errors, None
    transport, user, host, port = reach
    if host is not None:
        # So that a connection's errors name this entry (the transport sees only user, host and port).
        note_origin(host, port, user, f"{doc.file}:{doc.nearest_line((*at, 'ssh'))} (host {name!r})")
    for key in entry.env:
        _ENV_LINES[(name, key)] = (doc.file, doc.nearest_line((*at, "env", key)))
    for install, spec in entry.installs.items():
        for key in spec.env:
            _ENV_LINES.setdefault((name, key), (doc.file, doc.nearest_line((*at, "installs", install, "env", key))))
    return [], HostConfig(
        name=name,
        transport=transport,
        host=host,
        port=port,
        user=user,
        identity_file=entry.identity_file,
        known_hosts=entry.known_hosts,
        accept_new_host_keys=entry.accept_new_host_keys,
        ssh_config=_ssh_config(doc.file, entry.ssh_config),
        launcher=launcher,
        workdir=entry.workdir or (SIM_WORKDIR if sim else "~/orchestrator"),
        gpus=entry.gpus,
        env=dict(entry.env),
        secrets=tuple(entry.secrets),
        installs={n: InstallConfig(n, spec.launcher, dict(spec.env)) for n, spec in entry.installs.items()},
        deadlines={**(SIM_DEADLINES if sim else {}), **entry.deadlines},
        kill_foreign_gpu_holders=entry.kill_foreign_gpu_holders,
        python=entry.python or (sys.executable if sim else "python3"),
        port_base=entry.port_base,
        scenario=scenario,
        slurm=slurm,
    )


def _slurm(
    doc: LoadedYaml, at: YamlPath, entry: HostEntry, transport: Transport | None
) -> tuple[list[ConfigError], SlurmConfig | None]:
    """The `slurm:` section: required with `transport: slurm`, refused without it."""
    if transport != "slurm":
        if entry.slurm is None:
            return [], None
        message, fix = "slurm: only applies to `transport: slurm`", "add `transport: slurm`, or remove slurm:"
        return [error_at(doc, (*at, "slurm"), message, fix)], None
    if entry.slurm is None:
        fix = "add `slurm: {partition: gpu}` (the partition its jobs go to; account, qos, time, sbatch_args optional)"
        message = f"host {at[0]!r} has transport slurm but no slurm: section"
        return [error_at(doc, (*at, "transport"), message, fix)], None
    s = entry.slurm
    return [], SlurmConfig(s.partition, s.account, s.qos, s.time, tuple(s.sbatch_args))


_Reach = tuple[Transport, str | None, str | None, int | None]


def _reach(doc: LoadedYaml, at: YamlPath, entry: HostEntry) -> tuple[list[ConfigError], _Reach | None]:
    """The transport and, for ssh, user, host and port."""
    transport = entry.transport or ("ssh" if entry.ssh else None)
    if transport is None:
        fix = "add `ssh: user@host:22` (or an ~/.ssh/config alias), or `transport: local`"
        return [error_at(doc, at, f"host {at[0]!r} does not say how to reach it", fix)], None
    if transport == "slurm" and not entry.ssh:
        # No login node: sbatch, squeue and the probes run on this machine.
        errors = [
            error_at(doc, (*at, key), f"{key} only applies with an ssh: login node", f"remove {key}:, or add ssh:")
            for key in _SSH_ONLY
            if key in entry.model_fields_set
        ]
        return errors, (transport, None, None, None)
    if transport not in ("ssh", "slurm"):
        errors = [
            error_at(doc, (*at, key), f"{key} only applies to ssh hosts", f"remove {key}:")
            for key in ("ssh", *_SSH_ONLY)
            if key in entry.model_fields_set
        ]
        return errors, (transport, None, None, None)
    match = _SSH.match(entry.ssh or "")
    port = int(match["port"]) if match and match["port"] else None
    if not match or (port is not None and not 0 < port < 65536):
        message = f"ssh: {entry.ssh!r} is not user@host[:port] or an ~/.ssh/config alias"
        given = _PORT.search(entry.ssh or "")
        if port is not None:
            message = f"ssh: {entry.ssh!r} is not user@host[:port]: port {port} is out of range (1-65535)"
        elif given and not given[1].isdigit():
            message = f"ssh: {entry.ssh!r} is not user@host[:port]: port {given[1]!r} is not a number"
        where = (*at, "ssh" if entry.ssh else "transport")
        return [error_at(doc, where, message, "write e.g. `ssh: me@gpu-box:22`")], None
    return [], (transport, match["user"], match["host"].strip("[]"), port)


def _scenario(
    doc: LoadedYaml, at: YamlPath, scenario: str | None, launcher: str
) -> tuple[list[ConfigError], str | None]:
    """The scenario file's absolute path; relative paths are read from the hosts file's folder."""
    if scenario is None:
        return [], None
    folder = Path(doc.file).parent
    path = (folder / Path(scenario).expanduser()).resolve()
    if "orchestrator.sim" not in launcher:
        return [error_at(doc, (*at, "scenario"), "scenario: only applies to a simulated host", "remove it")], None
    if not path.is_file():
        message = f"scenario file {path} does not exist (relative paths are read from {folder})"
        return [error_at(doc, (*at, "scenario"), message, "fix the path")], None
    return [], str(path)


def _ssh_config(hosts_file: str, path: str | None) -> str:
    """The host's OpenSSH client config: `~/.ssh/config` unless given; relative paths are next to hosts.yaml."""
    if not path:
        return "~/.ssh/config"
    expanded = Path(path).expanduser()
    if expanded.is_absolute() or not hosts_file:
        return str(expanded)
    return str(Path(hosts_file).parent / expanded)
