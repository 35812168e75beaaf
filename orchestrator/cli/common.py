"""What several commands share: finding the host, the store, and turning our errors into exit codes."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console

from orchestrator.config.hosts import load_groups
from orchestrator.config.load import builtin_sim_host, load_hosts
from orchestrator.config.model import HostConfig
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.store import Store, default_db_path

DEFAULT_HOSTS = Path("configs/hosts.yaml")
USER_HOSTS = Path("~/.config/orchestrator/hosts.yaml")


def hosts_candidates(hosts_file: Path | None) -> list[Path]:
    """Where hosts.yaml is looked for, in order: --hosts, $ORCHESTRATOR_HOSTS, ./configs, ~/.config/orchestrator."""
    if hosts_file is not None:
        return [hosts_file]
    env = os.environ.get("ORCHESTRATOR_HOSTS")
    return [*([Path(env).expanduser()] if env else []), DEFAULT_HOSTS, USER_HOSTS.expanduser()]


def resolve_host(name: str | None, *, scenario: Path | None, hosts_file: Path | None) -> HostConfig:
    """The host a command runs on: `sim` is built in; others come from the first hosts.yaml found."""
    if not name:
        raise ConfigError("no host given", fix="pass --host NAME (an entry of configs/hosts.yaml, or sim)")
    tried = hosts_candidates(hosts_file)
    hosts_path = next((p for p in tried if p.exists()), None)
    hosts = load_hosts(hosts_path) if hosts_path is not None else {}
    if name in hosts:
        host = hosts[name]
    elif name == "sim":
        host = builtin_sim_host(str(scenario) if scenario else None)
    else:
        known = ", ".join(sorted(hosts)) or "none"
        where = hosts_path or tried[0]
        raise ConfigError(
            f"unknown host {name!r} (hosts.yaml has: {known}; looked in: {', '.join(map(str, tried))})",
            file=str(where),
            fix=f"add {name!r} to {where}, pass --hosts FILE or set ORCHESTRATOR_HOSTS, or use --host sim",
        )
    if scenario is not None:
        host = dataclasses.replace(host, scenario=str(scenario))
    return host


def resolve_hosts(names: Sequence[str], *, scenario: Path | None, hosts_file: Path | None) -> list[HostConfig]:
    """The hosts of a sweep: each `--host` (a host, or a group of hosts.yaml), in order, each host once."""
    hosts_path = next((p for p in hosts_candidates(hosts_file) if p.exists()), None)
    groups = load_groups(hosts_path) if hosts_path is not None else {}
    if hosts_path is not None:
        load_hosts(hosts_path)  # a broken file is reported as such, not as an unknown group member
    wanted = [member for name in names for member in groups.get(name, [name])]
    return [resolve_host(n, scenario=scenario, hosts_file=hosts_file) for n in dict.fromkeys(wanted)]


def open_store(db: Path | None, *, create: bool = True) -> Store:
    """The result store (--db, else $ORCHESTRATOR_DB, else ./orchestrator.db)."""
    return Store(db or default_db_path(), create=create)


@contextmanager
def exits_on_error(code: int = 1) -> Iterator[None]:
    """Print an orchestrator error plainly (file:line: message (fix: ...)) and exit with `code`."""
    try:
        yield
    except OrchestratorError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code) from exc


def make_console(*, stderr: bool = False) -> Console:
    """A console that keeps wide tables whole when the output is a file or a pipe (rich assumes 80 columns)."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=200)
    return console
