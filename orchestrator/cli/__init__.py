"""The command line: typer parses arguments and calls one pipeline per command; no decisions here.

Each command lives in its own module and is imported only when it runs: `classify` of one log must
start in a fraction of a second, without the SSH, HTTP and terminal-rendering libraries the sweep
commands need. `orchestrator --help` (or an unknown command) loads none of them: it lists each
command by its summary below, which a test holds equal to the command's own help.
Importing `app` from this package loads every command (tests drive the whole CLI that way).
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
    "sweeps": "sweeps",
    "compare": "analysis",
    "explain": "analysis",
    "repro": "repro",
    "run": "run",
    "report": "report",
    "bugreport": "report",
}
"""Command name -> the module under orchestrator.cli that registers it."""

SUMMARIES: dict[str, str] = {
    "sweep": "Run every cell of a matrix on a host and print the pass/fail table.",
    "table": "Print the pass/fail table of a sweep: one row per cell.",
    "sweeps": "List the store's sweeps, newest first: host, matrix, start, cells, pass/fail, which one is latest.",
    "explain": "For each failure category, the flag values and warnings that separate failing from passing cells.",
    "compare": "Compare two sweeps (or two installs of one): regressions, fixes, changed failures, versions.",
    "report": "A report of one sweep: an HTML heat-map page (--html FILE) or a Markdown comment (--md).",
    "bugreport": "Print one run as Markdown to paste into an SGLang GitHub issue.",
    "repro": "Re-run one run's exact command, environment and probes in a new run, and set the verdicts side by side.",
    "run": "Launch one SGLang server with the flags after `--`, probe it for real, and print the verdict.",
    "classify": (
        "Harvest and classify server logs offline: category, phase, root-cause line, why, tracebacks, warnings."
    ),
    "validate": "Expand a matrix and check every cell against an SGLang release's flags; launches nothing.",
}
"""What `orchestrator --help` says of each command, in the order a user meets them."""


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
    if command in COMMANDS and "--help" not in argv[: argv.index(command)]:
        load(command)
    else:
        list_only()
    app()


def list_only() -> None:
    """Register every command by its summary alone: enough for the root help and for "No such command"."""
    from orchestrator.cli.root import app

    for name, summary in SUMMARIES.items():
        app.command(name, help=summary)(_listed)


def _listed() -> None:
    """Never runs: `main` registers these only when the arguments name no command."""


def __getattr__(name: str) -> Any:
    if name == "app":
        from orchestrator.cli.root import app

        load()
        return app
    raise AttributeError(name)
