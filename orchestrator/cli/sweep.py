"""`orchestrator sweep MATRIX`: run every cell, live progress, the pass/fail table at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from orchestrator.cli.common import exits_on_error, make_console, open_store, resolve_host
from orchestrator.cli.root import app
from orchestrator.cli.sweep_plan import confirm_cost, not_run_lines
from orchestrator.config.load import load_matrix
from orchestrator.config.model import effective_deadlines
from orchestrator.matrix.cost import DEFAULT_MAX_HOURS
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
        Literal["full", "pairwise", "adaptive"] | None,
        typer.Option(
            help="full: every cell; pairwise: a covering array of value pairs; adaptive: that array, then the cells "
            "that localise each failure (default: full up to 64 cells, adaptive above; on --resume, the sweep's own)."
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="adaptive: launch at most this many cells in all, the covering array always whole "
            "(default: a tenth of the matrix).",
        ),
    ] = None,
    max_hours: Annotated[
        float, typer.Option(min=0, help="Ask before a sweep estimated to take longer than this (hours).")
    ] = DEFAULT_MAX_HOURS,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without asking, whatever the estimate.")] = False,
    retry_known_bad: Annotated[
        bool, typer.Option(help="Launch cells past sweeps proved invalid or unsupported on this host and version.")
    ] = False,
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
            budget=budget,
            retry_known_bad=retry_known_bad,
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
                on_cost=lambda cost: confirm_cost(console, cost, max_hours, yes, progress.paused),
                on_grow=progress.on_grow,
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
        used = str(record.settings.get("strategy") or "full")
        for line in not_run_lines(record, results, str(matrix_path)):
            console.print(line)
        console.print(f"sweep {sweep_id} · orchestrator table {sweep_id} · orchestrator explain {sweep_id}")
        if json_out:
            data = json.loads(render("json", results, record))
            if isinstance(data, dict):
                data.update(strategy=used, matrix_cells=matrix_cells, not_run=max(0, matrix_cells - len(results)))
                if used == "adaptive":
                    data["adaptive"] = record.settings.get("adaptive")
            json_out.write_text(json.dumps(data, indent=2) + "\n")
    if record.status == "interrupted":
        skipped = sum(1 for r in results if r.status is Status.SKIPPED)
        typer.echo(
            f"error: the sweep stopped after an infra failure (on_infra: stop); {skipped} cells skipped. "
            f"Fix the host, then finish it with: orchestrator sweep {matrix_path} --resume {sweep_id}",
            err=True,
        )
        raise typer.Exit(1)
