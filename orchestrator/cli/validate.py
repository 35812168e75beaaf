"""`orchestrator validate MATRIX [--against HELPFILE | --host H]`: expand and check a matrix, launch nothing.

Exit 1 when the file is invalid or any cell is invalid; without --host or --against the flags are
not checked at all, and the output says so rather than calling the cells ok.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import exits_on_error, make_console, resolve_host
from orchestrator.cli.root import app
from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig, Matrix, effective_deadlines
from orchestrator.errors import ConfigError
from orchestrator.matrix.expand import expand
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help, version_of_capture
from orchestrator.model import Cell
from orchestrator.store import Store, default_db_path
from orchestrator.sweep.plan import CellPlan, plan_cells
from orchestrator.sweep.strategy import cost_line

NOT_CHECKED = "not checked against a host"
HOW_TO_CHECK = "pass --host H (its installed SGLang) or --against HELPFILE (a saved `--help`) to check the flags"


@app.command()
def validate(
    matrix_path: Annotated[Path, typer.Argument(metavar="MATRIX", help="The matrix YAML file.")],
    against: Annotated[
        Path | None, typer.Option(help="A saved `--help` output of the SGLang release to check against.")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Check against this host's installed SGLang (preflight).")] = None,
    scenario: Annotated[Path | None, typer.Option(help="Scenario file of the simulated host.")] = None,
    hosts_file: Annotated[Path | None, typer.Option("--hosts", help="Hosts inventory.")] = None,
    strict: Annotated[
        bool, typer.Option(hidden=True, help="Accepted for old scripts: any invalid cell exits 1 anyway.")
    ] = False,
    db: Annotated[
        Path | None, typer.Option(help="The store whose past runs time the estimate (default: $ORCHESTRATOR_DB).")
    ] = None,
) -> None:
    """Expand a matrix and check every cell against an SGLang release's flags; launches nothing."""
    console = make_console()
    with exits_on_error():
        matrix = load_matrix(matrix_path)
        cells = expand(matrix)
        gpus = 1 << 16
        if against is not None:
            grammar = _grammar_from_file(against)
            plans = plan_cells(cells, lambda _install: grammar, gpus)
            cost = None
            source = f"{against} ({grammar.prog})"
        elif host is not None:
            host_config = resolve_host(host, scenario=scenario, hosts_file=hosts_file)
            plans, cost, source = _on_host(matrix, cells, host_config, db)
        else:
            plans = [CellPlan(c, ()) for c in cells]
            cost = None
            source = None
    invalid = [p for p in plans if not p.ok]
    checked = f"checked against {source}" if source else NOT_CHECKED
    table = Table(title=Text(f"{matrix.name}: {len(plans)} cells, {checked}"))
    table.add_column("cell")
    table.add_column("flags")
    table.add_column("check")
    for plan in plans:
        if not plan.ok:
            check = Text.assemble(("invalid", "yellow"), f": {plan.reason}")
        else:
            check = Text("ok", style="green") if source else Text("not checked", style="dim")
            if plan.notes:
                check.append(f" ({'; '.join(plan.notes)})")
        table.add_row(plan.cell.cell_id, Text(plan.cell.label), check)
    console.print(table)
    if source:
        console.print(f"{len(plans) - len(invalid)} valid, {len(invalid)} invalid")
    else:
        console.print(f"{len(plans)} cells not checked against a host: {HOW_TO_CHECK}")
    console.print(cost or cost_line(len(plans), [p.cell for p in plans if p.ok], matrix.deadlines), soft_wrap=True)
    if invalid:
        # Always, since issue 20 (`--strict` stays accepted): a typo must stop a script before the night starts.
        typer.echo(
            f"error: {matrix_path}: {len(invalid)} of {len(plans)} cells invalid (see above; fix the flags the "
            "reasons name, or remove those cells with `exclude:`)",
            err=True,
        )
        raise typer.Exit(1)


def _on_host(
    matrix: Matrix, cells: list[Cell], host_config: HostConfig, db: Path | None
) -> tuple[list[CellPlan], str, str]:
    """The host's preflight of every cell, the cost line from the store's past runs, and what was checked."""
    # Here, not at the top: a check against a saved --help (or none) must start without SSH and HTTP.
    from orchestrator.host.session import HostSession
    from orchestrator.sweep.plan_steps import plan_cost
    from orchestrator.sweep.preflight import run_preflight

    session = HostSession.open(host_config)
    try:
        preflight = run_preflight(session, cells, check_gpus=False)
    finally:
        session.close()
    path = db or default_db_path()
    with Store(path, create=False) if path.is_file() else nullcontext() as store:
        deadlines = effective_deadlines(host_config, matrix)
        cost = plan_cost(store, host_config, deadlines, preflight, None).text()
    versions = ", ".join(f"{k} {v}" for k, v in preflight.versions.items() if v)
    return list(preflight.plans), cost, f"host {host_config.name} ({versions})"


def _grammar_from_file(path: Path) -> FlagGrammar:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ConfigError(f"cannot read the help file: {exc.strerror}", file=str(path)) from exc
    if "usage:" not in text:
        raise ConfigError(
            "this is not SGLang's --help output (no 'usage:' line)",
            file=str(path),
            fix="save it with: python -m sglang.launch_server --help > FILE",
        )
    return parse_help(text, version_of_capture(text, str(path)))
