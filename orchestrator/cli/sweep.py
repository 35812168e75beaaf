"""`orchestrator sweep MATRIX`: run every cell, live progress, the pass/fail table at the end."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated, Literal

import typer

from orchestrator.cli.common import (
    check_output_file,
    echo,
    exits_on_error,
    make_console,
    open_store,
    print_table,
    resolve_hosts,
    unknown_matrix_host,
)
from orchestrator.cli.progress import SweepProgress
from orchestrator.cli.root import app
from orchestrator.cli.sweep_plan import confirm_cost, not_run_lines
from orchestrator.cli.sweep_resume import earlier_sweeps, finished_verdicts, foreign_matrix, resume_command
from orchestrator.config.load import load_matrix
from orchestrator.config.model import effective_deadlines
from orchestrator.config.where import problem_places, where_lines
from orchestrator.config.yamlpos import load_yaml
from orchestrator.errors import ConfigError, HostBusy, OrchestratorError
from orchestrator.matrix.cost import DEFAULT_MAX_HOURS
from orchestrator.model import Status
from orchestrator.report.table import render
from orchestrator.settings import parse_duration
from orchestrator.store.results import CellResult
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.interrupt import SweepInterrupted, report_lines
from orchestrator.sweep.preflight import Preflight


@app.command()
def sweep(
    matrix_path: Annotated[Path, typer.Argument(metavar="MATRIX", help="The matrix YAML file.")],
    host: Annotated[
        list[str] | None,
        typer.Option(
            help="Host from hosts.yaml, or sim (default: the matrix's). Repeat it, or name a group of hosts.yaml "
            "(`pool: {group: [a, b]}`), to spread the cells across several hosts.",
        ),
    ] = None,
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
    wait_for_host: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="When a host goes down, wait this long (90s, 30m) for it before its remaining cells are infra.",
        ),
    ] = None,
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
    resume_with = partial(
        resume_command, matrix_path, host=host, scenario=scenario, db=db, hosts_file=hosts_file, serial=serial
    )
    with exits_on_error():
        if json_out is not None:
            check_output_file(json_out, "--json-out")  # now, not after a night of launches
        matrix = load_matrix(matrix_path)
        if resume:
            with open_store(db, create=False) as store:
                if wrong := foreign_matrix(store, resume, matrix):
                    raise wrong
        names = host or _pool_of(db, resume) or ([matrix.host] if matrix.host else [])
        if names == [matrix.host] and not host and (unknown := unknown_matrix_host(matrix_path, names[0], hosts_file)):
            raise unknown
        hosts = resolve_hosts(names, scenario=scenario, hosts_file=hosts_file) if names else []
        if not hosts:
            raise ConfigError(
                "no host given: the matrix has no `host:` and no --host was passed",
                file=str(matrix_path),
                fix="add `host: NAME` to it (an entry of configs/hosts.yaml), or pass --host NAME (--host sim: the "
                "simulated host)",
            )
        host_config = hosts[0]
        options = SweepOptions(
            packed=not serial,
            settings=RunSettings(effective_deadlines(host_config, matrix), matrix.probes, matrix.stall),
            retries=matrix.retries,
            retry=matrix.retry,
            on_infra=matrix.on_infra,
            strategy=strategy,
            budget=budget,
            retry_known_bad=retry_known_bad,
            wait_for_host_s=_duration_option("--wait-for-host", wait_for_host),
            max_queued=max_queued,
        )
        with open_store(db) as store:
            said: list[str] = []

            def started(sweep_id: str) -> None:
                said.append(sweep_id)
                if not resume and progress.valid == 0:  # nothing will launch: no Ctrl-C to offer, nothing to resume
                    console.print(f"sweep {sweep_id} recorded; no cell to launch", markup=False, highlight=False)
                    return
                console.print(
                    f"sweep {sweep_id} {'resumed' if resume else 'started'}; Ctrl-C stops it cleanly, "
                    f"and `{resume_with(sweep_id)}` finishes it",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )

            try:
                with SweepProgress(console, retries=matrix.retries, policy=matrix.retry) as progress:

                    def planned(preflight: Preflight) -> None:
                        if said and resume:
                            # What ran before the interruption (and what re-attaching just finished) counts.
                            progress.seed(finished_verdicts(store, said[-1]))
                        progress.on_plan(preflight)

                    hooks = SweepHooks(
                        on_plan=planned,
                        on_event=progress.on_event,
                        on_result=progress.on_result,
                        on_reattach=lambda run, alive: console.print(
                            f"resume: run {run.run_id} was in flight; "
                            + ("re-attaching to it" if alive else "it is gone: its cell runs again")
                        ),
                        on_start=started,
                        on_cost=lambda cost: confirm_cost(console, cost, max_hours, yes, progress.paused),
                        on_grow=progress.on_grow,
                        on_host=lambda _name, line: console.print(line, soft_wrap=True, markup=False),
                        on_signal=lambda text: console.print(text, markup=False, highlight=False),
                    )
                    outcome = run_sweep(store, matrix, hosts or [host_config], options, hooks, resume=resume)
                    sweep_id = outcome.sweep_id
            except HostBusy as exc:
                if not exc.run_ids:
                    raise
                earlier = earlier_sweeps(store, exc.run_ids, lambda sid, path: resume_with(sid, matrix=path), exc.pgids)
                raise HostBusy(f"{exc} {earlier}") from exc
            except SweepInterrupted as exc:
                for line in report_lines(exc, resume_with(exc.sweep_id) if exc.sweep_id else None):
                    echo(line, err=True)
                raise typer.Exit(exc.exit_code) from None
            except OrchestratorError as exc:
                if said:  # the sweep's record exists: say how to finish it, whatever stopped it
                    finish = f"sweep {said[-1]} stopped here; finish it with: {resume_with(said[-1])}"
                    raise OrchestratorError(f"{exc}\n{finish}") from exc
                raise
            record = store.get_sweep(sweep_id)
            results = store.cell_results(sweep_id, matrix.retries)
        print_table(console, results, record)
        matrix_cells = int(record.settings.get("matrix_cells", len(results)))
        used = str(record.settings.get("strategy") or "full")
        for line in not_run_lines(record, results, str(matrix_path)):
            console.print(line)
        if outcome.saved_launches:
            console.print(
                f"retry policy: {outcome.saved_launches} launch(es) saved: failures a relaunch cannot change "
                "(deterministic) were not retried (retry: {deterministic: N} retries them)",
                markup=False,
            )
        console.print(f"sweep {sweep_id} · orchestrator table {sweep_id} · orchestrator explain {sweep_id}")
        if json_out:
            data = json.loads(render("json", results, record))
            if isinstance(data, dict):
                data.update(strategy=used, matrix_cells=matrix_cells, not_run=max(0, matrix_cells - len(results)))
                if used == "adaptive":
                    data["adaptive"] = record.settings.get("adaptive")
            json_out.write_text(json.dumps(data, indent=2) + "\n")
    _say_where_invalid(matrix_path, results)
    if results and all(r.status is Status.INVALID for r in results):
        # A typo in every cell is not a finished sweep: a script or a scheduler must see it fail.
        typer.echo(
            f"error: {matrix_path}: every cell is invalid (the reasons are above); nothing was launched "
            f"(fix: correct the flags; `orchestrator validate {matrix_path} --host {host_config.name}` checks them "
            "without a sweep)",
            err=True,
        )
        raise typer.Exit(1)
    for name, why in outcome.unchecked.items():
        typer.echo(
            f"warning: host {name}: its servers of this sweep could not be stopped or their GPUs checked ({why}); "
            f"once it is back, `{resume_with(sweep_id)}` stops them and reruns what it could not finish",
            err=True,
        )
    if record.status == "interrupted":
        skipped = sum(1 for r in results if r.status is Status.SKIPPED)
        typer.echo(
            f"error: the sweep stopped after an infra failure (on_infra: stop); {skipped} cells skipped. "
            f"Fix the host, then finish it with: {resume_with(sweep_id)}",
            err=True,
        )
        raise typer.Exit(1)


def _duration_option(option: str, value: str | None) -> float:
    """Seconds from a DURATION option (0 when not given); a bad value is a clear error."""
    if value is None:
        return 0.0
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from exc


def _pool_of(db: Path | None, resume: str | None) -> list[str]:
    """The hosts a pool sweep being resumed ran on (resumed on the same ones unless --host says otherwise)."""
    if not resume:
        return []
    with open_store(db, create=False) as store:
        pool = store.resolve_sweep(resume).settings.get("pool") or []
    return [str(entry["name"]) for entry in pool if isinstance(entry, dict) and "name" in entry]


def _say_where_invalid(matrix_path: Path, results: list[CellResult]) -> None:
    """The matrix lines the invalid cells' reasons point at (as `validate` says them), after the table."""
    invalid = [r for r in results if r.status is Status.INVALID]
    if not invalid:
        return
    try:
        doc = load_yaml(matrix_path)
    except OrchestratorError:  # the file changed or went since the sweep read it: the reasons stand alone
        return
    places = [problem_places(doc, r.cell, (r.reason, r.root_cause_line or "")) for r in invalid]
    for line in where_lines(str(matrix_path), places):
        echo(line, err=True)
