"""What several commands share: finding the host, the store, the terminal, and turning our errors into exit codes.

Terminal output shows text others control (log lines, flag values) and must obey none of its
control characters: the console a command makes is a SafeConsole, and making it guards the plain
stdout/stderr of the command too (orchestrator/textsafe.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console

from orchestrator.config.model import HostConfig
from orchestrator.errors import ConfigError, OrchestratorError, StoreError
from orchestrator.report.table import term_lines
from orchestrator.safeconsole import SafeConsole
from orchestrator.store import Store, default_db_path
from orchestrator.store.records import SweepRecord
from orchestrator.store.results import CellResult
from orchestrator.textsafe import guard_standard_streams, visible

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
    # Here, not at the top: `table`, `classify` and `--help` must start without pydantic's schemas.
    from orchestrator.config.hosts import locate_hosts_file
    from orchestrator.config.load import builtin_sim_host, load_hosts

    if not name:
        raise ConfigError("no host given", fix="pass --host NAME (an entry of configs/hosts.yaml, or sim)")
    tried = hosts_candidates(hosts_file)
    # A file the user named (--hosts, $ORCHESTRATOR_HOSTS) must exist: never another one read in its place.
    hosts_path = locate_hosts_file(hosts_file, os.environ)
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
    if host.transport == "sim" and host.scenario:
        _check_scenario(Path(host.scenario), given=scenario is not None)
    return host


def _check_scenario(path: Path, *, given: bool) -> None:
    """A simulated host's scenario, read now: missing or broken, the host's preflight would only see an SGLang
    that does not say its version, and advise fixing hosts.yaml's launcher."""
    from orchestrator.sim.scenario import load_scenario

    if given and not path.is_file():
        raise ConfigError(
            "--scenario names a file that does not exist" + (" (it is a folder)" if path.is_dir() else ""),
            file=str(path),
            fix="give --scenario a scenario YAML (configs/sim/ has examples), or leave it out for the incident's",
        )
    load_scenario(path)


def unknown_matrix_host(matrix_path: Path, name: str, hosts_file: Path | None) -> ConfigError | None:
    """The error for a matrix whose `host:` names no host or group of hosts.yaml, at that line; None if known.

    resolve_host's own error names hosts.yaml only, while the name to fix was written in the matrix.
    """
    from orchestrator.config.hosts import load_groups, locate_hosts_file
    from orchestrator.config.load import load_hosts
    from orchestrator.config.yamlpos import load_yaml

    hosts_path = locate_hosts_file(hosts_file, os.environ)
    known = sorted(load_hosts(hosts_path)) + sorted(load_groups(hosts_path)) if hosts_path is not None else []
    if name == "sim" or name in known:
        return None
    where = hosts_path or hosts_candidates(hosts_file)[0]
    instead = f"write `host: {known[0]}`, " if len(known) == 1 else f"write one of {', '.join(known)}, "
    instead = instead if known else ""
    return ConfigError(
        f"host {name!r} is not in {where} (hosts.yaml has: {', '.join(known) or 'none'})",
        file=str(matrix_path),
        line=load_yaml(matrix_path).line_of(("host",)),
        fix=f"{instead}add {name!r} to {where}, or pass --host NAME (sim: the simulated host)",
    )


def resolve_hosts(names: Sequence[str], *, scenario: Path | None, hosts_file: Path | None) -> list[HostConfig]:
    """The hosts of a sweep: each `--host` (a host, or a group of hosts.yaml), in order, each host once."""
    from orchestrator.config.hosts import load_groups, locate_hosts_file
    from orchestrator.config.load import load_hosts

    hosts_path = locate_hosts_file(hosts_file, os.environ)
    groups = load_groups(hosts_path) if hosts_path is not None else {}
    if hosts_path is not None:
        load_hosts(hosts_path)  # a broken file is reported as such, not as an unknown group member
    wanted = [member for name in names for member in groups.get(name, [name])]
    return [resolve_host(n, scenario=scenario, hosts_file=hosts_file) for n in dict.fromkeys(wanted)]


def store_path(db: Path | None) -> Path:
    """The result store's file (--db, else $ORCHESTRATOR_DB, else ./orchestrator.db); a folder is refused by name."""
    path = Path(db or default_db_path())
    if path.is_dir():  # SQLite would only say "unable to open database file", or table "no store at"
        raise StoreError(
            f"the store {path} is a folder (fix: name a file in it: --db {path / 'orchestrator.db'}, or set "
            "ORCHESTRATOR_DB to one)"
        )
    return path


def open_store(db: Path | None, *, create: bool = True) -> Store:
    """The result store (--db, else $ORCHESTRATOR_DB, else ./orchestrator.db)."""
    return Store(store_path(db), create=create)


@contextmanager
def exits_on_error(code: int = 1) -> Iterator[None]:
    """Print an orchestrator error plainly (file:line: message (fix: ...)) and exit with `code`."""
    try:
        yield
    except OrchestratorError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(code) from exc


def check_output_file(path: Path, option: str) -> None:
    """Refuse, before any work, a file that cannot be written: its folder missing or read-only, or a folder itself."""
    folder = path.parent if str(path.parent) else Path(".")
    reason = None
    if path.is_dir():
        reason = "it is a folder"
    elif not folder.is_dir():
        reason = f"the folder {folder} does not exist"
    elif not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        reason = f"{folder if not path.exists() else 'it'} is read-only"
    if reason:
        raise ConfigError(
            f"cannot write this {option} file: {reason}",
            file=str(path),
            fix=f"pass {option} a path in a writable folder",
        )


def guard_terminal() -> None:
    """From now on, show the control characters written to stdout and stderr instead of sending them.

    For what a command prints without its console (`typer.echo`, a library's print); a SafeConsole
    writes around the guard, its text already made visible and its styling its own.
    """
    guard_standard_streams()


def echo(message: str, *, err: bool = False, nl: bool = True) -> None:
    """`typer.echo` of text that may carry a log's or a flag's text: its control characters shown, not sent."""
    typer.echo(visible(message), err=err, nl=nl)


def make_console(*, stderr: bool = False) -> Console:
    """The command's console: it shows control characters, highlights nothing, and keeps wide tables whole
    when the output is a file or a pipe (rich assumes 80 columns). The command's plain output is guarded too.
    """
    guard_terminal()
    console = SafeConsole(stderr=stderr)
    if not console.is_terminal:
        console = SafeConsole(stderr=stderr, width=200)
    return console


def print_table(console: Console, results: list[CellResult], record: SweepRecord, *, wide: bool = False) -> None:
    """The pass/fail table at the terminal's width, or every row whole on one line for a pipe or file."""
    width = console.width if console.is_terminal else None
    for line in term_lines(results, record, width, wide=wide):
        # soft_wrap: neither wrapped nor cut by rich; the layout already fits the width it was given.
        console.print(line, soft_wrap=True)
