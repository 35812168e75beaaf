"""`orchestrator repro RUN [--script]`: re-run one stored run exactly, or print a script that does.

The re-run replays the run's recorded command line and environment (on a new port; secrets read
from this process's environment at launch, never stored) with the deadlines and probe settings
its sweep stored. It is recorded as the only run of a new one-cell sweep named `repro-<run id>`,
so the original sweep's table stays exactly as it was; `orchestrator compare` can set the two side
by side. Exit status, as for the script: 0 no failure, 1 the failure reproduced (same status, phase
and category), 2 could not re-run, 3 failed differently.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import exits_on_error, make_console, open_store, resolve_host
from orchestrator.cli.formats import FORMAT_HELP, json_wanted
from orchestrator.cli.root import app
from orchestrator.config.load import matrix_from_yaml
from orchestrator.config.model import EnvValue, HostConfig, SecretRef
from orchestrator.config.yamlpos import parse_yaml
from orchestrator.errors import ConfigError
from orchestrator.host.launcher import LaunchSpec
from orchestrator.host.session import HostSession
from orchestrator.model import Cell, Status, Verdict
from orchestrator.planning.cells import flag_secrets
from orchestrator.report.repro import ReproLaunch, render_repro_script, repro_launch, run_settings
from orchestrator.settings import Stall
from orchestrator.store.records import RunRecord, SweepRecord, new_run_id, new_sweep_id
from orchestrator.store.secrets import MASK
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import launch_attempt
from orchestrator.sweep.connect import open_host
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.interrupt import Interrupts, SweepInterrupted, report_lines
from orchestrator.sweep.lanes import Member
from orchestrator.sweep.preflight import run_preflight
from orchestrator.transport import HostBreaker

REPRODUCED, COULD_NOT_RUN, FAILED_DIFFERENTLY = 1, 2, 3


@app.command()
def repro(
    run: Annotated[
        str, typer.Argument(metavar="RUN", help="The run to reproduce: its id or a unique prefix, or SWEEP:CELL.")
    ],
    script: Annotated[bool, typer.Option("--script", help="Print a standalone bash script instead.")] = False,
    host: Annotated[str | None, typer.Option(help="Re-run on this host (default: the run's own).")] = None,
    db: Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")] = None,
    hosts_file: Annotated[Path | None, typer.Option("--hosts", help="Hosts inventory.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print both verdicts as one JSON object.")] = False,
    fmt: Annotated[Literal["term", "json"] | None, typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
) -> None:
    """Re-run one run's exact command, environment and probes in a new run, and set the verdicts side by side.

    Exit 0: no failure; 1: the failure reproduced; 2: could not re-run; 3: it failed differently.
    """
    as_json = json_wanted(as_json, fmt)
    with exits_on_error(COULD_NOT_RUN), open_store(db, create=False) as store:
        original = store.get_run(run)
        sweep = store.get_sweep(original.sweep_id)
        cell = _cell_of(store, original)
        if script:
            typer.echo(render_repro_script(original, cell, sweep), nl=False)
            return
        host_config = repro_host(sweep, host or original.host, hosts_file)  # a pool's run: the host it ran on
        console = make_console(stderr=as_json)
        try:
            again = rerun(store, original, cell, sweep, host_config, lambda text: console.print(text, markup=False))
        except SweepInterrupted as exc:
            for line in report_lines(exc, None):
                typer.echo(line, err=True)
            raise typer.Exit(exc.exit_code) from None
    code = exit_code(original.verdict, again.verdict)
    if as_json:
        typer.echo(json.dumps(_payload(original, again, code), indent=2))
    else:
        print_side_by_side(console, original, again, cell, code)
    raise typer.Exit(code)


def _cell_of(store: Store, run: RunRecord) -> Cell:
    cells = {c.cell_id: c for c in store.get_cells(run.sweep_id)}
    return cells.get(run.cell_id) or Cell(cell_id=run.cell_id, flags={}, install=run.install)


def repro_host(sweep: SweepRecord, name: str | None, hosts_file: Path | None) -> HostConfig:
    """The host to re-run on, resolved by name again (the stored config is masked); a sim keeps its scenario."""
    settings = sweep.settings or {}
    host = resolve_host(name or sweep.host, scenario=None, hosts_file=hosts_file)
    pool = {str(e.get("name")): e for e in settings.get("pool") or [] if isinstance(e, dict)}
    scenario = pool[host.name].get("scenario") if host.name in pool else settings.get("scenario")
    if host.transport == "sim" and scenario:
        host = dataclasses.replace(host, scenario=str(scenario))
    return host


def secret_values(names: Sequence[str], sources: Mapping[str, EnvValue], environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets of a replay, read now: through the host's or matrix's reference, else under their own name."""
    values: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        ref = sources.get(name)
        if isinstance(ref, str) and not isinstance(ref, SecretRef) and ref != MASK:
            values[name] = ref  # a literal from hosts.yaml, which is read afresh (stored copies are masked)
            continue
        var = ref.name if isinstance(ref, SecretRef) else name
        if var in environ:
            values[name] = environ[var]
        else:
            missing.append(var if var == name else f"{var} (for {name})")
    if missing:
        raise ConfigError(
            f"the run needs secrets that are not set here: {', '.join(missing)}",
            fix="export them in the shell that runs orchestrator repro (they are never stored)",
        )
    return values


def _matrix_env(sweep: SweepRecord) -> dict[str, EnvValue]:
    """The stored matrix's environment, where it still parses (only its secret references are used)."""
    try:
        return matrix_from_yaml(parse_yaml(sweep.matrix_yaml, sweep.matrix_path or "<stored matrix>")).env
    except ConfigError:
        return {}


def rerun(
    store: Store,
    original: RunRecord,
    cell: Cell,
    sweep: SweepRecord,
    host: HostConfig,
    on_signal: Callable[[str], None] = lambda _text: None,
) -> RunRecord:
    """Launch the run's command again as the one run of a new sweep `repro-<run id>`; returns the new run."""
    launch = repro_launch(original)
    sources = {**host.env_for(original.install), **_matrix_env(sweep)}
    secrets = secret_values(launch.secret_names, sources, os.environ)
    # A secret flag value (`--api-key "${VAR}"`, or a masked one) is read again from its variable, here and now.
    secrets |= flag_secrets(launch.argv("0"), os.environ)
    deadlines, probes = run_settings(sweep)
    sweep_id = new_sweep_id()
    member = Member(host, HostBreaker(host.name))
    interrupts = Interrupts(
        lambda _name: open_host(host), store, deadlines.stop_grace, deadlines.gpu_release, on_signal
    )
    # The sweep's own stop: Ctrl-C or SIGTERM stops the re-run's server and checks its GPUs are free.
    with interrupts.installed():
        try:
            session = member.hold(sweep_id)
            preflight = run_preflight(session, [cell])
            store.create_sweep(
                SweepRecord(
                    sweep_id=sweep_id,
                    name=f"repro-{original.run_id}",
                    host=host.name,
                    matrix_yaml=f"# orchestrator repro {original.run_id} (sweep {sweep.sweep_id})\n{sweep.matrix_yaml}",
                    matrix_path=sweep.matrix_path,
                    started_at=time.time(),
                    host_facts=preflight.host_facts,
                    versions=preflight.versions,
                    settings={k: v for k, v in sweep.settings.items() if k not in ("pool", "lanes")}
                    | {"host": host.to_dict(), "retries": 0, "repro_of": original.run_id},
                )
            )
            interrupts.started(sweep_id)
            store.save_cells(sweep_id, [cell])
            spec = _spec(session, original, cell, launch, sorted(secrets))
            # The sweep's own attempt pipeline: numbered by the store, a lost launch reply stopped, the same watch.
            stored = sweep.settings.get("stall")  # the sweep's own windows (older sweeps: the defaults)
            stall = Stall({str(k): float(v) for k, v in stored.items()}) if isinstance(stored, dict) else Stall()
            launch_attempt(store, session, sweep_id, cell, spec, secrets, RunSettings(deadlines, probes, stall))
            store.finish_sweep(sweep_id, "done", time.time())
        except SweepInterrupted as exc:
            interrupts.settle(exc)
            raise
        finally:
            member.leave()
    return store.get_run(spec.run_id)


def _spec(session: HostSession, original: RunRecord, cell: Cell, launch: ReproLaunch, secrets: list[str]) -> LaunchSpec:
    """The original launch again, on a new port and in a new run directory, on the GPUs it had."""
    (port,) = session.placement.free_ports(1, set())
    run_id = new_run_id()
    return LaunchSpec(
        run_id=run_id,
        argv=tuple(launch.argv(str(port))),
        env=dict(launch.env),
        secret_names=tuple(secrets),
        gpus=original.gpus or tuple(range(cell.tp_size)),
        port=port,
        run_dir=session.run_dir(run_id),
        install=original.install,
        gpu_count=cell.tp_size,
    )


def exit_code(before: Verdict | None, after: Verdict | None) -> int:
    """0 no failure, 1 the same failure (status, phase and category), 2 the re-run itself failed, 3 a different one."""
    if after is None or after.status in (Status.INFRA, Status.SKIPPED):
        return COULD_NOT_RUN
    if after.status == Status.PASS:
        return 0
    same = before is not None and (before.status, before.phase, before.category) == (
        after.status,
        after.phase,
        after.category,
    )
    return REPRODUCED if same else FAILED_DIFFERENTLY


_OUTCOME = {
    0: "no failure",
    REPRODUCED: "the failure reproduced",
    COULD_NOT_RUN: "the re-run itself failed",
    FAILED_DIFFERENTLY: "it failed differently",
}


def _side(run: RunRecord) -> dict[str, Any]:
    verdict = run.verdict.to_dict() if run.verdict else {}
    return {"run_id": run.run_id, "sweep_id": run.sweep_id, **verdict}


def _payload(original: RunRecord, again: RunRecord, code: int) -> dict[str, Any]:
    return {"original": _side(original), "repro": _side(again), "outcome": _OUTCOME[code], "exit_code": code}


def print_side_by_side(console: Console, original: RunRecord, again: RunRecord, cell: Cell, code: int) -> None:
    """The two verdicts in columns: status, phase, category, root cause, failed probe."""
    # Text, not str: flag values and log lines are data, never rich markup.
    table = Table(title=Text(f"repro of {cell.label}"), title_justify="left")
    table.add_column("")
    table.add_column(f"original {original.run_id}", overflow="fold")
    table.add_column(f"repro {again.run_id}", overflow="fold")
    before, after = _side(original), _side(again)
    for key, label in (
        ("status", "status"),
        ("phase", "phase"),
        ("category", "category"),
        ("root_cause_line", "root cause"),
        ("failed_probe", "failed probe"),
        ("reason", "reason"),
    ):
        table.add_row(label, Text(str(before.get(key) or "-")), Text(str(after.get(key) or "-")))
    console.print(table)
    console.print(f"{_OUTCOME[code]} · repro sweep {again.sweep_id} · run dir {again.run_dir}", markup=False)
