"""What `sweep` says about its plan: the cost before launching (and asking when it is high), what it did not run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from rich.console import Console
from rich.prompt import Confirm

from orchestrator.model import Status
from orchestrator.planning.known_bad import KNOWN_BAD_PREFIX
from orchestrator.store.records import SweepRecord
from orchestrator.store.results import CellResult
from orchestrator.sweep.adaptive import STOP_TEXT

if TYPE_CHECKING:  # `table` prints not_run_lines: it must not load the preflight machinery costing needs
    from orchestrator.planning.strategy import LaunchCost


def confirm_cost(
    console: Console,
    cost: LaunchCost,
    max_hours: float,
    yes: bool,
    paused: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> None:
    """Print the cost; above `max_hours` ask (on a terminal) or refuse (without one) unless `yes`.

    `paused` keeps a live display from drawing over the question.
    """
    from orchestrator.sweep.costing import CostRefused

    console.print(f"plan: {cost.text()}", soft_wrap=True)
    hours = cost.estimate.hours
    if hours <= max_hours or yes:
        return
    over = f"the estimate, about {hours:.1f} h, is above --max-hours {max_hours:g}"
    if sys.stdin.isatty() and console.is_terminal:
        with paused():
            go = Confirm.ask(f"{over}. Start it anyway?", console=console, default=False)
        if go:
            return
        raise CostRefused("not started: declined at the prompt; nothing was launched")
    raise CostRefused(
        f"not started: {over}, and there is no terminal to ask. Nothing was launched. Pass --yes to start it "
        "anyway, --max-hours H to raise the limit, or launch fewer cells (--strategy adaptive --budget N, "
        "--strategy pairwise)"
    )


def not_run_lines(record: SweepRecord, results: Sequence[CellResult], matrix_path: str) -> list[str]:
    """How many cells of the matrix were not run, and why; how many were skipped as known bad."""
    lines = []
    matrix_cells = int(record.settings.get("matrix_cells", len(results)))
    used = str(record.settings.get("strategy") or "full")
    left = matrix_cells - len(results)
    if left > 0:
        if used == "adaptive":
            end = record.settings.get("adaptive") or {}
            why = (
                f"localisation stopped after {end.get('spent', '?')} launched cells of a budget of "
                f"{end.get('budget', '?')}: {STOP_TEXT.get(str(end.get('stop')), 'it was interrupted')}"
            )
        else:
            why = "their value pairs are covered by the cells that ran"
        lines.append(
            f"strategy {used}: {left} of {matrix_cells} cells not run ({why}); "
            f"orchestrator sweep {matrix_path} --strategy full --resume {record.sweep_id} runs them"
        )
    known = [r for r in results if r.status is Status.SKIPPED and r.reason.startswith(KNOWN_BAD_PREFIX)]
    if known:
        lines.append(
            f"{len(known)} cells skipped as known bad (a past sweep on this host, SGLang version and GPU proved "
            "them invalid or unsupported); --retry-known-bad runs them"
        )
    return lines
