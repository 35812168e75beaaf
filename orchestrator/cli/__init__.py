"""The command line: typer parses arguments and calls one pipeline per command; no decisions here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="orchestrator",
    help="Sweep SGLang flag combinations on a GPU host, probe each launch for real, and name every failure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def main() -> None:
    """Entry point of the `orchestrator` console script."""
    app()


from orchestrator.cli import analysis, classify, report, repro, run, sweep, table, validate  # noqa: E402,F401
