"""`orchestrator sweep MATRIX`: run every cell, live progress, the pass/fail table at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from orchestrator.cli.common import exits_on_error, make_console, open_store, resolve_host
from orchestrator.cli.root import app
from orchestrator.config.load import load_matrix
from orchestrator.config.model import effective_deadlines
from orchestrator.model import Status
from orchestrator.report.table import render, summary_line, term_table
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.runner import SweepHooks, SweepOptions, resume_sweep, start_sweep


@app.command()
def sweep(
    matrix_path: Annotated[Path, typer.Argument(metavar="MATRIX", help="The matrix YAML file.")],
    host: Annotated[str | None, typer.Option(help="Host from hosts.yaml, or sim (default: the matrix's).")] = None,
    scenario: Annotated[Path | None, typer.Option(help="Scenario file of the simulated host.")] = None,
    db: Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")] = None,
    resume: Annotated[str | None, typer.Option(help="Finish this interrupted sweep instead of starting one.")] = None,
    serial: Annotated[bool, typer.Option(help="One launch at a time (no GPU packing).")] = False,
    json_out: Annotated[Path | None, typer.Option(help="Also write the table as JSON here.")] = None,
    hosts_file: Annotated[Path | None, typer.Option("--hosts", help="Hosts inventory.")] = None,
    strategy: Annotated[
        Literal["full", "pairwise"], typer.Option(help="full: every cell; pairwise: a covering array of value pairs.")
    ] = "full",
    max_queued: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Slurm hosts: jobs submitted ahead at most (default: every cell; 32 through an SSH login node).",
        ),
    ] = None,
) -> None:
    """Run every cell of a matrix on a host and print the pass/fail table."""
    console = make_console()
    with exits_on_error():
        matrix = load_matrix(matrix_path)
        host_config = resolve_host(host or matrix.host, scenario=scenario, hosts_file=hosts_file)
        options = SweepOptions(
            packed=not serial,
            settings=RunSettings(effective_deadlines(host_config, matrix), matrix.probes),
            retries=matrix.retries,
            on_infra=matrix.on_infra,
            strategy=strategy,
            max_queued=max_queued,
        )
        with open_store(db) as store, SweepProgress(console) as progress:
            hooks = SweepHooks(
                on_plan=progress.on_plan,
                on_event=progress.on_event,
                on_result=progress.on_result,
                on_reattach=lambda run, alive: console.print(
                    f"resume: run {run.run_id} was in flight; "
                    + ("re-attaching to it" if alive else "it is gone: its cell runs again")
                ),
            )
            if resume:
                sweep_id = resume_sweep(store, resume, matrix, host_config, options, hooks)
            else:
                sweep_id = start_sweep(store, matrix, host_config, options, hooks)
            record = store.get_sweep(sweep_id)
            results = store.cell_results(sweep_id, matrix.retries)
        console.print(term_table(results, record))
        console.print(summary_line(results))
        matrix_cells = int(record.settings.get("matrix_cells", len(results)))
        used = str(record.settings.get("strategy", "full"))
        if matrix_cells > len(results):
            console.print(
                f"strategy {used}: {matrix_cells - len(results)} of {matrix_cells} cells not run "
                "(their value pairs are covered by the cells that ran; --strategy full runs them)"
            )
        console.print(f"sweep {sweep_id} · orchestrator table {sweep_id} · orchestrator explain {sweep_id}")
        if json_out:
            data = json.loads(render("json", results, record))
            if isinstance(data, dict):
                data.update(strategy=used, matrix_cells=matrix_cells)
            json_out.write_text(json.dumps(data, indent=2) + "\n")
    if record.status == "interrupted":
        skipped = sum(1 for r in results if r.status is Status.SKIPPED)
        typer.echo(
            f"error: the sweep stopped after an infra failure (on_infra: stop); {skipped} cells skipped. "
            f"Fix the host, then finish it with: orchestrator sweep {matrix_path} --resume {sweep_id}",
            err=True,
        )
        raise typer.Exit(1)
