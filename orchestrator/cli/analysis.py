"""`orchestrator compare A B` and `orchestrator explain [SWEEP]`: what changed, and what separates failures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from orchestrator.analysis.compare import compare as compare_views
from orchestrator.analysis.compare import compare_installs
from orchestrator.analysis.explain import explain as explain_view
from orchestrator.analysis.inputs import SweepView
from orchestrator.analysis.render import render_comparison, render_explanation
from orchestrator.analysis.speed import Speeds
from orchestrator.cli.common import exits_on_error, open_store
from orchestrator.cli.root import app
from orchestrator.errors import StoreError
from orchestrator.report.speed_view import speeds_of
from orchestrator.report.views import sweep_view
from orchestrator.store.records import SweepRecord
from orchestrator.store.sqlite import Store

SWEEP_HELP = "Sweep id or unique prefix (default: the latest sweep that launched something; see `orchestrator sweeps`)."

Format = Literal["term", "md", "json"]


def load_view(store: Store, ref: str | SweepRecord | None) -> SweepView:
    """A stored sweep as the analysis reads it."""
    return load_measured(store, ref)[0]


def load_measured(store: Store, ref: str | SweepRecord | None) -> tuple[SweepView, Speeds]:
    """A stored sweep as the analysis reads it, and the speed of each of its measured passing cells."""
    record = ref if isinstance(ref, SweepRecord) else store.resolve_sweep(ref)
    results = store.cell_results(record.sweep_id, int(record.settings.get("retries", 0)))
    return sweep_view(record, results), speeds_of(results)


def newer_of(store: Store, old: SweepRecord) -> SweepRecord:
    """What `compare OLD` compares OLD with: the latest sweep of the same matrix on the same host, after OLD."""
    what = f"matrix {old.name!r} on host {old.host}"
    listed = "`orchestrator sweeps` lists the store's sweeps"
    new = store.latest_like(old)
    if new is None:
        raise StoreError(
            f"{store.path}: sweep {old.sweep_id} is the only sweep of {what} that launched something, so there is "
            f"nothing to compare it with (fix: name both, `orchestrator compare OLD NEW`; {listed})"
        )
    if (new.started_at, new.sweep_id) < (old.started_at, old.sweep_id):
        raise StoreError(
            f"{store.path}: sweep {old.sweep_id} is the latest sweep of {what}; compare takes the older sweep "
            f"first (fix: `orchestrator compare {new.sweep_id} {old.sweep_id}` compares the one before it with it; "
            f"{listed})"
        )
    return new


def installs_pair(view: SweepView, installs: str, store: Store) -> tuple[str, str]:
    """`--installs BEFORE,AFTER` checked against the sweep's installs before anything is compared."""
    before, comma, after = (part.strip() for part in installs.partition(","))
    known = sorted({c.install for c in view.cells if c.install})
    if not known:
        raise StoreError(
            f"{store.path}: sweep {view.sweep_id} has no installs (its matrix has no `installs:` list), so "
            "--installs has nothing to compare (fix: compare two sweeps, `orchestrator compare OLD NEW`, or sweep "
            "a matrix with `installs: [before, after]`)"
        )
    if not comma or not before or not after:
        raise StoreError(f"--installs takes BEFORE,AFTER, got {installs!r} (fix: --installs {','.join(known[:2])})")
    missing = [name for name in (before, after) if name not in known]
    if missing:
        raise StoreError(
            f"{store.path}: sweep {view.sweep_id} has no install {', '.join(missing)} "
            f"(fix: use its installs: {', '.join(known)})"
        )
    return before, after


@app.command()
def compare(
    a: Annotated[str, typer.Argument(metavar="A", help="The sweep before (id or unique prefix).")],
    b: Annotated[
        str | None,
        typer.Argument(
            metavar="B",
            help="The sweep after (default: the latest sweep of the same matrix on the same host; with --installs, "
            "the same sweep)."
        ),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = "term",
    installs: Annotated[
        str | None, typer.Option(help="BEFORE,AFTER: compare two installs of one sweep (environments as an axis).")
    ] = None,
    fail_on_regression: Annotated[bool, typer.Option(help="Exit 1 when any cell regressed.")] = False,
    db: Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")] = None,
) -> None:
    """Compare two sweeps (or two installs of one): regressions, fixes, changed failures, versions."""
    with exits_on_error(), open_store(db, create=False) as store:
        old = store.resolve_sweep(a)
        view_a, speeds_a = load_measured(store, old)
        if installs:
            before, after = installs_pair(view_a, installs, store)
            result = compare_installs(view_a, before, after, speeds=speeds_a)
        else:
            new = store.resolve_sweep(b) if b is not None else newer_of(store, old)
            if new.sweep_id == old.sweep_id:
                typer.echo(
                    f"note: both ids name sweep {old.sweep_id}, and a sweep compared with itself shows no change "
                    "(to compare it with the latest sweep of its matrix on its host, pass it alone)",
                    err=True,
                )
            elif b is None:
                typer.echo(
                    f"comparing {old.sweep_id} with {new.sweep_id}, the latest sweep of matrix {old.name!r} on "
                    f"host {old.host}",
                    err=True,
                )
            view_b, speeds_b = load_measured(store, new)
            result = compare_views(view_a, view_b, speeds=(speeds_a, speeds_b))
    typer.echo(render_comparison(result, fmt, color=fmt == "term"), nl=False)
    if fail_on_regression and result.regressions:
        raise typer.Exit(1)


@app.command()
def explain(
    sweep: Annotated[
        str | None,
        typer.Argument(metavar="SWEEP", help=SWEEP_HELP),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = "term",
    db: Annotated[Path | None, typer.Option(help="The store (default: $ORCHESTRATOR_DB or ./orchestrator.db).")] = None,
) -> None:
    """For each failure category, the flag values and warnings that separate failing from passing cells."""
    with exits_on_error(), open_store(db, create=False) as store:
        view, speeds = load_measured(store, sweep)
    typer.echo(render_explanation(explain_view(view, speeds=speeds), fmt, color=fmt == "term"), nl=False)
