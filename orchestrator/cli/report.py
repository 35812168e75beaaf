"""`orchestrator report [SWEEP] --html FILE | --md` and `orchestrator bugreport RUN`: reports to share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from orchestrator.analysis.compare import Comparison
from orchestrator.analysis.compare import compare as compare_views
from orchestrator.analysis.explain import explain
from orchestrator.analysis.inputs import SweepView
from orchestrator.analysis.render import render_comparison, render_explanation
from orchestrator.cli.common import check_output_file, echo, exits_on_error, open_store
from orchestrator.cli.root import app
from orchestrator.errors import OrchestratorError
from orchestrator.model import Phase, Status
from orchestrator.report.bugreport import render_bugreport
from orchestrator.report.html import render_html
from orchestrator.report.speed_view import speeds_of
from orchestrator.report.table import render_md, table_json
from orchestrator.report.views import sweep_view
from orchestrator.store.records import RunRecord, SweepRecord
from orchestrator.store.results import CellResult
from orchestrator.store.sqlite import Store

SWEEP_HELP = "Sweep id or unique prefix (default: the latest sweep that launched something; see `orchestrator sweeps`)."

COMMENT_MAX = 65_000
"""GitHub refuses comments over 65,536 characters."""

DbOption = Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")]


def _load(store: Store, ref: str | None) -> tuple[SweepRecord, list[CellResult]]:
    record = store.resolve_sweep(ref)
    return record, store.cell_results(record.sweep_id, int(record.settings.get("retries", 0)))


def markdown_report(
    sweep: SweepRecord, results: list[CellResult], baseline: tuple[SweepRecord, list[CellResult]] | None = None
) -> str:
    """Why cells fail, what changed against the baseline, then the pass/fail table: one GitHub comment."""
    view = sweep_view(sweep, results)
    parts = [render_explanation(explain(view, speeds=speeds_of(results)), "md")]
    if baseline is not None:
        parts.append(render_comparison(_compared(baseline, view, results), "md"))
    # The table's own limit leaves out its closing "… N more cells" line: keep room for it.
    room = COMMENT_MAX - sum(len(part) + 1 for part in parts) - 200
    return "\n".join([*parts, render_md(results, sweep, max_chars=room)])


def json_report(
    sweep: SweepRecord, results: list[CellResult], baseline: tuple[SweepRecord, list[CellResult]] | None = None
) -> dict[str, Any]:
    """`report --format json`: the table's JSON contract, the explanation and, with --compare, the comparison."""
    view = sweep_view(sweep, results)
    compared = _compared(baseline, view, results).to_dict() if baseline is not None else None
    explained = explain(view, speeds=speeds_of(results)).to_dict()
    return {"table": table_json(results, sweep), "explain": explained, "compare": compared}


def _compared(baseline: tuple[SweepRecord, list[CellResult]], view: SweepView, results: list[CellResult]) -> Comparison:
    """The baseline against this sweep, speed regressions and improvements included."""
    return compare_views(sweep_view(*baseline), view, speeds=(speeds_of(baseline[1]), speeds_of(results)))


@app.command()
def report(
    sweep: Annotated[
        str | None,
        typer.Argument(metavar="SWEEP", help=SWEEP_HELP),
    ] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page here.")] = None,
    md: Annotated[
        bool, typer.Option("--md", help="Print Markdown for a GitHub comment: explain, then the table.")
    ] = False,
    fmt: Annotated[
        Literal["md", "json"] | None,
        typer.Option("--format", "-f", help="md: the same as --md; json: the table, explain and compare as JSON."),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--compare", help="Mark regressions and fixes against this earlier sweep.")
    ] = None,
    x: Annotated[str | None, typer.Option("--x", help="Axis across (columns) of the heat-map.")] = None,
    y: Annotated[str | None, typer.Option("--y", help="Axis down (rows) of the heat-map.")] = None,
    colour: Annotated[
        Literal["status", "speed"],
        typer.Option("--colour", help="Colour the heat-map by verdict, or passing cells by output tok/s."),
    ] = "status",
    db: DbOption = None,
) -> None:
    """A report of one sweep: an HTML heat-map page (--html FILE) or a Markdown comment (--md)."""
    md = md or fmt == "md"
    if html is None and not md and fmt is None:
        raise typer.BadParameter("pass --html FILE, --md (or --format md|json), or both", param_hint="--html/--md")
    with exits_on_error():
        if html is not None:
            check_output_file(html, "--html")
        with open_store(db, create=False) as store:
            record, results = _load(store, sweep)
            other = _load(store, baseline) if baseline else None
    if html is not None:
        try:
            page = render_html(record, results, baseline=other, x=x, y=y, colour=colour)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--x/--y") from exc
        try:
            html.write_text(page, encoding="utf-8")
        except OSError as exc:
            typer.echo(f"error: {html}: cannot write it: {exc.strerror} (fix: pass --html a writable path)", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"wrote {html} ({len(results)} cells of {record.sweep_id})", err=md)
    if md:
        echo(markdown_report(record, results, other), nl=False)
    elif fmt == "json":
        typer.echo(json.dumps(json_report(record, results, other), indent=2))


@app.command()
def bugreport(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="Run id or unique prefix (the table's run column), or SWEEP:CELL for the run a table row shows.",
        ),
    ],
    db: DbOption = None,
) -> None:
    """Print one run as Markdown to paste into an SGLang GitHub issue."""
    with exits_on_error(), open_store(db, create=False) as store:
        record = store.get_run(run)
        _reportable(record)
        sweep, results = _load(store, record.sweep_id)
        text = render_bugreport(record, sweep, results)
    echo(text, nl=False)


def _reportable(run: RunRecord) -> None:
    """Refuse a run that is no SGLang bug: it passed, the host or the tool failed (infra), or it has no verdict yet.

    Rendered anyway, a pass read "SGLang fails at after_decode (healthy)": a wrong issue to file upstream.
    """
    status = run.verdict.status if run.verdict else None
    if status is Status.INVALID and run.verdict is not None and run.verdict.phase is Phase.PREFLIGHT:
        raise OrchestratorError(
            f"run {run.run_id} was rejected before launch: its flags are the matrix's to fix, not an SGLang bug "
            f"(fix: correct them; `orchestrator validate MATRIX --host {run.host}` checks them)"
        )
    why = {
        Status.PASS: "passed: there is no failure to report",
        Status.INFRA: "failed for the host or the orchestrator (infra), not for SGLang",
        Status.SKIPPED: "was skipped: it never ran",
        None: "has no verdict yet (still running, or interrupted)",
    }.get(status)
    if why:
        raise OrchestratorError(
            f"run {run.run_id} {why} (fix: pick a failing run from `orchestrator table {run.sweep_id} -f csv`, "
            "its run_id column)"
        )
