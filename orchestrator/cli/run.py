"""`orchestrator run --host H -- <SGLang flags>`: launch and probe one server, print its verdict."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

from orchestrator.cli.common import exits_on_error, make_console, open_store, resolve_host
from orchestrator.cli.formats import FORMAT_HELP, json_wanted
from orchestrator.cli.root import app
from orchestrator.config.model import HostConfig, Matrix
from orchestrator.errors import OrchestratorError
from orchestrator.matrix.argv import cell_from_argv
from orchestrator.model import Cell, Phase
from orchestrator.probe.speed import band_of, speed_text
from orchestrator.settings import Deadlines
from orchestrator.store.records import COMMAND_LINE, RunRecord, SweepRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.connect import open_host
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.interrupt import SweepInterrupted, report_lines

SIMULATED_NOTE = (
    "simulated host: a stand-in server with a fake nvidia-smi and no model; its verdict says nothing about a "
    "real GPU (name a host of hosts.yaml with --host for that)"
)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Host from hosts.yaml, or sim (the default: simulated, no GPU).")] = "sim",
    scenario: Annotated[Path | None, typer.Option(help="Scenario file of the simulated host.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as one JSON object.")] = False,
    fmt: Annotated[Literal["term", "json"] | None, typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    db: Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")] = None,
    hosts_file: Annotated[Path | None, typer.Option("--hosts", help="Hosts inventory.")] = None,
) -> None:
    """Launch one SGLang server with the flags after `--`, probe it for real, and print the verdict."""
    argv = list(ctx.args)
    as_json = json_wanted(as_json, fmt)
    console = make_console(stderr=as_json)
    with exits_on_error():
        host_config = resolve_host(host, scenario=scenario, hosts_file=hosts_file)  # a broken hosts.yaml first
        if not argv:
            raise OrchestratorError(
                "no SGLang flags after `--`: there is nothing to launch (fix: the flags as SGLang takes them, e.g. "
                "`orchestrator run -- --model-path /models/M --tp-size 8`)"
            )
        matrix = one_cell_matrix(host_config, argv)
        options = SweepOptions(packed=False, settings=RunSettings(Deadlines().with_overrides(host_config.deadlines)))
        simulated = host_config.transport == "sim"
        if simulated:
            # Nobody should take a simulated pass for a real one: said first, and again with the verdict.
            console.print(SIMULATED_NOTE, markup=False, highlight=False)
        with open_store(db) as store:
            hooks = SweepHooks(
                on_event=_phase_printer(console),
                on_signal=lambda text: console.print(text, markup=False, highlight=False),
            )
            try:
                sweep_id = run_sweep(store, matrix, [host_config], options, hooks).sweep_id
            except SweepInterrupted as exc:
                for line in report_lines(exc, None):
                    typer.echo(line, err=True)
                raise typer.Exit(exc.exit_code) from None
            runs = store.runs(sweep_id)
            if not runs:
                raise OrchestratorError(f"sweep {sweep_id} recorded no run of the command line (nothing was launched)")
            payload = run_payload(store, runs[-1]) | {"simulated": simulated}
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    print_verdict(console, payload)


def _phase_printer(console: Console) -> Callable[[Cell, str, Phase | None], None]:
    """Print each phase the launch reaches, once (the log's marker and the health poll both report ready)."""
    shown: list[str] = []

    def show(_cell: Cell, event: str, phase: Phase | None) -> None:
        name = phase.value if phase else event
        if not shown or shown[-1] != name:
            shown.append(name)
            console.print(f"  {name}", markup=False)

    return show


def one_cell_matrix(host: HostConfig, argv: list[str]) -> Matrix:
    """A matrix of exactly the given flags (parsed with the host's own grammar)."""
    session = open_host(host)
    try:
        cell = cell_from_argv(argv, session.grammar(None))
    finally:
        session.close()
    text = "# orchestrator run\nflags:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in cell.flags.items())
    # Every given flag is a one-value axis: the table then shows them all, and expansion gives one cell.
    return Matrix(name="run", path=COMMAND_LINE, text=text, axes={k: [v] for k, v in cell.flags.items()})


def run_payload(store: Store, run: RunRecord) -> dict[str, Any]:
    """The verdict of one run, with where its files are (the `--json` output)."""
    sweep: SweepRecord = store.get_sweep(run.sweep_id)
    cells = {c.cell_id: c for c in store.get_cells(run.sweep_id)}
    verdict = run.verdict.to_dict() if run.verdict else {}
    evidence = run.evidence or {}
    return {
        "run_id": run.run_id,
        "sweep_id": run.sweep_id,
        "cell_id": run.cell_id,
        "host": sweep.host,
        "flags": cells[run.cell_id].flags if run.cell_id in cells else {},
        **verdict,
        "ready_s": run.outcome.ready_s if run.outcome else None,
        "probes": [p.to_dict() for p in run.outcome.probes] if run.outcome else [],
        # The standard load's measurement after every probe passed (probe/speed.py); null: none was run.
        "speed": run.outcome.speed if run.outcome else None,
        "warnings": evidence.get("warnings", []),
        "command": run.command,
        "run_dir": run.run_dir,
        "log": f"{run.run_dir}/server.log" if run.run_dir else None,
        "versions": sweep.versions,
        "took_s": round((run.ended_at or time.time()) - run.started_at, 2),
    }


def print_verdict(console: Console, payload: dict[str, Any]) -> None:
    """Human output of one run's verdict."""
    status = payload.get("status", "?")
    style = {"pass": "green", "fail": "red", "invalid": "yellow"}.get(status, "magenta")
    shown = f"{status} (simulated host)" if payload.get("simulated") else status
    console.print(f"[bold {style}]{shown}[/]  phase={payload.get('phase')}  category={payload.get('category')}")
    if payload.get("failed_probe"):
        console.print(f"failed probe: {payload['failed_probe']}", markup=False)
    for probe in payload.get("probes", []):
        mark = "ok " if probe["ok"] else "FAIL"
        line = f"  {mark} {probe['name']:<11} {probe.get('latency_s') or 0:.2f}s  {probe.get('error') or ''}"
        console.print(line, markup=False, soft_wrap=True)
    said = speed_line(payload)
    if said:
        console.print(said, markup=False, soft_wrap=True)
    if payload.get("root_cause_line"):
        console.print(f"root cause: {payload['root_cause_line']}", markup=False)
    if payload.get("reason"):
        console.print(f"reason: {payload['reason']}", markup=False)
    where = f"run dir {payload['run_dir']} · log {payload['log']}" if payload.get("run_dir") else "not launched"
    console.print(f"run {payload['run_id']} · {where}", markup=False)


def speed_line(payload: dict[str, Any]) -> str | None:
    """What the table's `tok/s` column says of a passing run, in words: its figure and what it was measured
    under, or why it has none. None where nothing was measured (a failing run, `load: off`)."""
    speed = payload.get("speed")
    if payload.get("status") != "pass" or not speed:
        return None
    if band_of(speed) is None:
        return f"speed: invalid, no figure kept: {speed.get('why') or 'the load gave none'}"
    ttft, itl, load = speed.get("ttft_ms") or {}, speed.get("itl_ms") or {}, speed.get("load") or {}
    return (
        f"speed: {speed_text(speed)} output tok/s (median ± half the spread of {len(speed.get('repeats') or [])} "
        f"repeats; TTFT p50 {ttft.get('p50')} ms, ITL p50 {itl.get('p50')} ms; {load.get('requests')} requests, "
        f"concurrency {load.get('concurrency')}, {load.get('input_len')} tokens in, {load.get('output_len')} out)"
    )
