"""The typer application every command module registers on (kept apart so a command loads alone)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="orchestrator",
    help="Sweep SGLang flag combinations on a GPU host, probe each launch for real, and name every failure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Sweep SGLang flag combinations on a GPU host, probe each launch for real, and name every failure."""
