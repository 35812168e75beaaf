"""The command line: typer parses arguments and calls one pipeline per command; no decisions here.

Each command lives in its own module and is imported only when it runs: `classify` of one log must
start in a fraction of a second, without the SSH, HTTP and terminal-rendering libraries the sweep
commands need. `orchestrator --help` (or an unknown command) loads them all so typer can list them.
Importing `app` from this package loads every command too (tests drive the whole CLI that way).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

COMMANDS: dict[str, str] = {
    "classify": "classify",
    "validate": "validate",
    "sweep": "sweep",
    "table": "table",
    "compare": "analysis",
    "explain": "analysis",
    "repro": "repro",
    "run": "run",
    "report": "report",
    "bugreport": "report",
}
"""Command name -> the module under orchestrator.cli that registers it."""


def load(command: str | None = None) -> None:
    """Import the module of one command, or of all of them."""
    modules = [COMMANDS[command]] if command in COMMANDS else sorted(set(COMMANDS.values()))
    for module in modules:
        importlib.import_module(f"orchestrator.cli.{module}")


def command_of(argv: list[str]) -> str | None:
    """The command an argument list names (its first word that is not an option), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def main() -> None:
    """Entry point of the `orchestrator` console script."""
    from orchestrator.cli.root import app

    argv = sys.argv[1:]
    command = command_of(argv)
    load(command if command in COMMANDS and "--help" not in argv[: argv.index(command)] else None)
    app()


def __getattr__(name: str) -> Any:
    if name == "app":
        from orchestrator.cli.root import app

        load()
        return app
    raise AttributeError(name)
