"""The typer application every command module registers on (kept apart so a command loads alone)."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Annotated

import typer

import orchestrator
from orchestrator.textsafe import guard_standard_streams

app = typer.Typer(
    name="orchestrator",
    help="Sweep SGLang flag combinations on a GPU host, probe each launch for real, and name every failure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_GRAMMARS = Path(orchestrator.__file__).resolve().parent / "sim" / "grammars"


def version_text() -> str:
    """`orchestrator 0.1.0 (python 3.11.2; SGLang flags known: 0.5.23, 0.5.9)`: what a bug report asks first."""
    # The file names, not matrix.shipped: the version must print without importing the tool's modules.
    known = sorted((p.stem for p in _GRAMMARS.glob("*.json")), key=lambda v: [int(x) for x in v.split(".")])
    flags = f"; SGLang flags known: {', '.join(reversed(known))}" if known else ""
    return f"orchestrator {orchestrator.__version__} (python {platform.python_version()}{flags})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print the orchestrator's version and exit."
        ),
    ] = False,
) -> None:
    """Sweep SGLang flag combinations on a GPU host, probe each launch for real, and name every failure."""
    # Every command's terminal output shows control characters of log and flag text instead of obeying them.
    guard_standard_streams()
