"""`orchestrator validate MATRIX [--against HELPFILE | --host H] [--format term|json]`: check a matrix, launch nothing.

Exit 1 when the file is invalid or any cell is invalid. Without --host or --against the flags are checked
against the newest SGLang release whose grammar ships with the tool (a typo or `tp-size: eight` is caught
before the night), and the output says which release, and that the host's own `--help` decides.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import echo, exits_on_error, make_console, resolve_host, unknown_matrix_host
from orchestrator.cli.root import app
from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig, Matrix, effective_deadlines
from orchestrator.config.where import FlagPlace, problem_places, where_lines
from orchestrator.config.yamlpos import load_yaml
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.matrix.expand import expand
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help, version_of_capture
from orchestrator.matrix.shipped import shipped_grammar, shipped_versions
from orchestrator.model import Cell
from orchestrator.planning.cells import CellPlan, plan_cell, plan_cells
from orchestrator.planning.estimate import launch_estimate
from orchestrator.planning.strategy import planned_cost
from orchestrator.store import Store, default_db_path
from orchestrator.sweep.connect import open_host

NOT_CHECKED = "not checked against a host"
HOW_TO_CHECK = "pass --host H (its installed SGLang) or --against HELPFILE (a saved `--help`) to check the flags"
Format = Literal["term", "json"]


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
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = "term",
) -> None:
    # The help's paragraphs are one line each: typer keeps a docstring's line breaks, cutting sentences.
    """Expand a matrix and check every cell against an SGLang release's flags; launches nothing.

    Without --host or --against, the cells are checked against the newest SGLang release whose flags ship with orchestrator (a cell only an older shipped release accepts is valid, with a note); the host's own `--help` decides, so run it again with --host before the night.
    """  # noqa: E501
    with exits_on_error():
        matrix = load_matrix(matrix_path)
        cells = expand(matrix)
        gpus = 1 << 16
        cost = None
        if against is not None:
            grammar = _grammar_from_file(against)
            plans = plan_cells(cells, lambda _install: grammar, gpus)
            source = f"{against} ({grammar.prog})"
        elif host is not None:
            host_config = resolve_host(host, scenario=scenario, hosts_file=hosts_file)
            plans, cost, source = _on_host(matrix, cells, host_config, db)
        else:
            plans, source = shipped_plans(cells, gpus)
    on_host = host is not None or against is not None
    invalid = [p for p in plans if not p.ok]
    if cost is None:  # no host: no past runs, no known-bad cells, one launch at a time, the deadlines' worst case
        valid, load = [p.cell for p in plans if p.ok], matrix.probes.load
        cost = planned_cost(
            len(plans), valid, len(invalid), None, None, (),
            lambda n: launch_estimate(n, 1, matrix.deadlines, [], valid, False, load),
        ).text()  # fmt: skip
    places = _places(matrix_path, plans)
    if fmt == "json":
        typer.echo(json.dumps(_document(matrix, plans, source, on_host, cost, places), indent=2))
    else:
        _print(matrix, plans, source, on_host, cost)
    if not on_host:
        _warn_of_matrix_host(matrix_path, matrix.host, hosts_file)
    for line in where_lines(str(matrix_path), [places[plan.cell.cell_id] for plan in invalid]):
        echo(line, err=True)
    if invalid:
        # Always, since issue 20 (`--strict` stays accepted): a typo must stop a script before the night starts.
        typer.echo(
            f"error: {matrix_path}: {len(invalid)} of {len(plans)} cells invalid (see above; fix the flags the "
            "reasons name, or remove those cells with `exclude:`)",
            err=True,
        )
        raise typer.Exit(1)


def _places(matrix_path: Path, plans: list[CellPlan]) -> dict[str, list[FlagPlace]]:
    """cell id -> the flag as written, its value and line, of each flag its problems name: where to fix a cell."""
    doc = load_yaml(matrix_path)
    return {plan.cell.cell_id: problem_places(doc, plan.cell, plan.problems) for plan in plans}


def _warn_of_matrix_host(matrix_path: Path, name: str | None, hosts_file: Path | None) -> None:
    """Say now, not at the sweep, that the matrix's `host:` (the sweep's default host) is unknown or unreadable.

    A warning: the flags may be valid all the same, and the night may run with --host.
    """
    unknown: OrchestratorError | None
    try:
        unknown = unknown_matrix_host(matrix_path, name, hosts_file) if name else None
    except OrchestratorError as exc:
        unknown = exc
    if unknown is not None:
        echo(f"warning: {unknown}; `orchestrator sweep` without --host would stop here", err=True)


def shipped_plans(cells: list[Cell], gpus: int) -> tuple[list[CellPlan], str]:
    """Every cell checked against the newest shipped grammar; one only an older shipped release accepts is valid."""
    newest, *older = shipped_versions()
    plans = plan_cells(cells, lambda _install: shipped_grammar(newest), gpus)
    for index, plan in enumerate(plans):
        for version in older if not plan.ok else ():
            other = plan_cell(plan.cell, shipped_grammar(version), gpus)
            if other.ok:
                note = f"valid in sglang {version}, not in {newest}: {plan.reason}"
                plans[index] = replace(other, notes=(*other.notes, note))
                break
    known = f"; {', '.join(older)} also known" if older else ""
    return plans, f"sglang {newest}, the newest release whose flags ship with orchestrator{known}"


def _print(matrix: Matrix, plans: list[CellPlan], source: str, on_host: bool, cost: str) -> None:
    console = make_console()
    invalid = [p for p in plans if not p.ok]
    table = Table(title=Text(f"{matrix.name}: {len(plans)} cells, checked against {source}"))
    table.add_column("cell")
    table.add_column("flags")
    table.add_column("check")
    for plan in plans:
        if not plan.ok:
            check = Text.assemble(("invalid", "yellow"), f": {plan.reason}")
        else:
            check = Text("ok", style="green")
            if plan.notes:
                check.append(f" ({'; '.join(plan.notes)})")
        table.add_row(plan.cell.cell_id, Text(plan.cell.label), check)
    console.print(table)
    counts = f"{len(plans) - len(invalid)} valid, {len(invalid)} invalid"
    if on_host:
        console.print(counts)
    else:
        console.print(
            f"{counts} against {source.split(',')[0]}; {len(plans)} cells {NOT_CHECKED}, whose own `--help` decides: "
            f"{HOW_TO_CHECK}",
            soft_wrap=True,
        )
    console.print(cost, soft_wrap=True)


def _document(
    matrix: Matrix,
    plans: list[CellPlan],
    source: str,
    on_host: bool,
    cost: str,
    places: dict[str, list[FlagPlace]],
) -> dict[str, Any]:
    """`validate --format json`: what was checked against, and each cell's verdict."""
    return {
        "matrix": matrix.name,
        "file": matrix.path,
        "checked_against": source,
        "checked_on_host": on_host,
        "valid": sum(p.ok for p in plans),
        "invalid": sum(not p.ok for p in plans),
        "cost": cost,
        "cells": [
            {
                "cell_id": p.cell.cell_id,
                "label": p.cell.label,
                "ok": p.ok,
                "problems": list(p.problems),
                "notes": list(p.notes),
                "where": [{"flag": w.flag, "line": w.line} for w in places[p.cell.cell_id]],
            }
            for p in plans
        ],
    }


def _on_host(
    matrix: Matrix, cells: list[Cell], host_config: HostConfig, db: Path | None
) -> tuple[list[CellPlan], str, str]:
    """The host's preflight of every cell, the cost line from the store's past runs, and what was checked."""
    # Here, not at the top: a check against a saved --help (or none) must start without SSH and HTTP.
    from orchestrator.sweep.plan_steps import plan_cost
    from orchestrator.sweep.preflight import run_preflight

    session = open_host(host_config)
    try:
        preflight = run_preflight(session, cells, check_gpus=False)
    finally:
        session.close()
    path = db or default_db_path()
    with Store(path, create=False) if path.is_file() else nullcontext() as store:
        deadlines = effective_deadlines(host_config, matrix)
        cost = plan_cost(store, host_config, deadlines, preflight, None, load=matrix.probes.load).text()
    versions = ", ".join(f"{k} {v}" for k, v in preflight.versions.items() if v)
    return list(preflight.plans), cost, f"host {host_config.name} ({versions})"


def _grammar_from_file(path: Path) -> FlagGrammar:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the --against help file: {exc.strerror}",
            file=str(path),
            fix="give --against a saved `python -m sglang.launch_server --help > FILE`, or check with --host H instead",
        ) from exc
    if "usage:" not in text:
        raise ConfigError(
            "this is not SGLang's --help output (no 'usage:' line)",
            file=str(path),
            fix="save it with: python -m sglang.launch_server --help > FILE",
        )
    return parse_help(text, version_of_capture(text, str(path)))
