"""`orchestrator sweeps [--format term|md|csv|json] [--db PATH]`: the store's sweeps, newest first.

Each with its host, matrix, start, cells and pass/fail counts, and which one a bare `table`, `explain`
or `report` shows: the newest sweep of a matrix that launched something (never a one-cell `run`, a
repro, or a sweep whose every cell was invalid). `table --list` prints the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import echo, exits_on_error, make_console, open_store
from orchestrator.cli.root import app
from orchestrator.report.table import TableFormat, render_sweeps

DbOption = Annotated[
    Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB, else ./orchestrator.db).")
]


def print_sweeps(fmt: TableFormat, db: Path | None) -> None:
    """Print the store's sweeps in a format (shared by `sweeps` and `table --list`)."""
    with exits_on_error(), open_store(db, create=False) as store:
        summaries = store.sweep_summaries()
    if fmt != "term":
        (typer.echo if fmt == "json" else echo)(render_sweeps(fmt, summaries), nl=False)
        return
    console = make_console()
    text = render_sweeps("term", summaries, console.width if console.is_terminal else None)
    console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
    if summaries:
        console.print(
            "`orchestrator table SWEEP` shows one; without SWEEP, the one marked latest",
            style="dim",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def sweeps(
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", help="Output format.")] = "term",
    db: DbOption = None,
) -> None:
    """List the store's sweeps, newest first: host, matrix, start, cells, pass/fail, which one is latest."""
    print_sweeps(fmt, db)
