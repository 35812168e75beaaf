"""`orchestrator table [SWEEP] [--format term|md|csv|json|html] [--wide] [--sort matrix|speed] [--best] [--db PATH]`.

The pass/fail table of a sweep, with a `tok/s` column where passing cells were measured; `--sort speed` puts
the fastest passing cell first, `--best` names it with the exact command its run launched.

On a terminal the table fits its width (status, phase and category always shown, root causes cut, or
wrapped with `--wide`); piped or redirected, every row is printed whole on one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, cast

import typer

from orchestrator.cli.common import echo, make_console, print_table, store_path
from orchestrator.cli.root import app
from orchestrator.cli.sweep_plan import not_run_lines
from orchestrator.errors import StoreError
from orchestrator.report import speed_view
from orchestrator.report.table import TableFormat, render
from orchestrator.store import Store

SWEEP_HELP = "Sweep id or unique prefix (default: the latest sweep that launched something; see `orchestrator sweeps`)."


@app.command()
def table(
    sweep: Annotated[str | None, typer.Argument(metavar="SWEEP", help=SWEEP_HELP)] = None,
    fmt: Annotated[
        Literal["term", "md", "csv", "json", "html"],
        typer.Option("--format", "-f", help="Output format (html: the heat-map page of `report --html`, on stdout)."),
    ] = "term",
    wide: Annotated[
        bool, typer.Option("--wide", help="Wrap root causes onto more lines instead of cutting them to the width.")
    ] = False,
    db: Annotated[
        Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB, else ./orchestrator.db).")
    ] = None,
    listing: Annotated[
        bool, typer.Option("--list", help="List the store's sweeps instead (as `orchestrator sweeps`).")
    ] = False,
    sort: Annotated[
        Literal["matrix", "speed"],
        typer.Option("--sort", help="Row order: the matrix's, or fastest passing cell first (output tok/s)."),
    ] = "matrix",
    best: Annotated[
        bool, typer.Option("--best", help="Name the fastest passing cell and its exact command instead.")
    ] = False,
) -> None:
    """Print the pass/fail table of a sweep: one row per cell."""
    if fmt == "html" and (listing or best):
        raise typer.BadParameter(
            "html is a sweep's page: --list and --best take term, md, csv or json", param_hint="-f"
        )
    if listing:
        from orchestrator.cli.sweeps import print_sweeps

        print_sweeps(_table_format(fmt), db)
        return
    try:
        with Store(store_path(db), create=False) as store:
            record = store.resolve_sweep(sweep)
            results = store.cell_results(record.sweep_id)
            newer = 0 if sweep else next(i for i, r in enumerate(store.list_sweeps()) if r.sweep_id == record.sweep_id)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if fmt == "html":
        from orchestrator.report.html import render_html

        echo(render_html(record, speed_view.by_speed(results) if sort == "speed" else results), nl=False)
        return
    if best:
        (typer.echo if fmt == "json" else echo)(speed_view.render_best(fmt, results, record), nl=False)
        return
    if sort == "speed":
        results = speed_view.by_speed(results)
    if fmt == "term":
        console = make_console()
        print_table(console, results, record, wide=wide)
        for line in not_run_lines(record, results, record.matrix_path or "MATRIX"):
            console.print(line, soft_wrap=True)
        if newer:
            console.print(
                f"the latest sweep that launched something; {newer} newer (one-cell runs, repros, or sweeps that "
                "launched nothing): `orchestrator sweeps` lists them",
                style="dim",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    else:
        (typer.echo if fmt == "json" else echo)(render(_table_format(fmt), results, record), nl=False)


def _table_format(fmt: str) -> TableFormat:
    """`fmt` once html is handled: one of the text formats the table and the sweeps list share."""
    return cast(TableFormat, fmt)
