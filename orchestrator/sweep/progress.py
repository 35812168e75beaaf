"""The live view of a sweep: cell i of N, what each launch in flight is doing, counts, and an ETA.

On a terminal it is a rich Live panel; elsewhere (a log file, CI) one line per finished attempt,
so an overnight sweep's output still reads well in the morning.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.model import Cell, Phase, Status
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.execute import QUEUED_EVENT
from orchestrator.sweep.preflight import Preflight

STATUS_STYLE = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.INVALID: "yellow",
    Status.INFRA: "magenta",
    Status.SKIPPED: "dim",
}


@dataclass
class _InFlight:
    cell: Cell
    started: float
    phase: str = "launching"


class SweepProgress:
    """Receives sweep events (from worker threads) and keeps the display current."""

    def __init__(self, console: Console, total: int = 0):
        self.console = console
        self.total = total
        self.done = 0
        self.invalid = 0
        self.latest: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.durations: list[float] = []
        self.in_flight: dict[str, _InFlight] = {}
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live: Live | None = None

    def __enter__(self) -> SweepProgress:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def on_plan(self, preflight: Preflight) -> None:
        """Preflight is done: the cells to run are known."""
        with self._lock:
            self.total = len(preflight.plans)
            self.invalid = len(preflight.invalid)
            self.done = self.invalid + len(self.latest)
            if self.invalid:
                self.counts[Status.INVALID.value] = self.invalid
        self.console.print(
            f"preflight {preflight.seconds:.1f}s: {len(preflight.valid)} cells to launch, "
            f"{len(preflight.invalid)} invalid; " + ", ".join(f"{k} {v}" for k, v in preflight.versions.items() if v)
        )
        for plan in preflight.invalid:
            line = f"* {escape(plan.cell.label)}: [yellow]invalid[/] ({escape(plan.reason)})"
            self.console.print(line, soft_wrap=True)
        self._refresh()

    def on_event(self, cell: Cell, event: str, phase: Phase | None) -> None:
        """A launch moved on (launched, reached a phase, started a probe)."""
        with self._lock:
            entry = self.in_flight.setdefault(cell.cell_id, _InFlight(cell, time.monotonic()))
            entry.phase = phase.value if phase else event
            if event.startswith(QUEUED_EVENT):  # the launch's time starts when its job runs, not in the queue
                entry.started = time.monotonic()
        self._refresh()

    def on_result(self, result: AttemptResult) -> None:
        """An attempt ended with a verdict."""
        verdict = result.verdict
        with self._lock:
            entry = self.in_flight.pop(result.cell.cell_id, None)
            took = time.monotonic() - entry.started if entry else 0.0
            if entry:
                self.durations.append(took)
            # A retried cell counts once, with the status of its latest attempt.
            self.latest[result.cell.cell_id] = verdict.status.value
            self.done = self.invalid + len(self.latest)
            self.counts = Counter(self.latest.values())
            if self.invalid:
                self.counts[Status.INVALID.value] += self.invalid
        style = STATUS_STYLE.get(verdict.status, "")
        why = f" at {verdict.phase.value}" if verdict.phase and verdict.status is not Status.PASS else ""
        cause = f" {verdict.category.value}" if verdict.status is not Status.PASS else ""
        # Flag values are the user's text: `[/]` in one must print as itself, not as rich markup.
        line = f"* {escape(result.cell.label)}: [{style}]{verdict.status.value}[/]{why}{cause}, took {took:.1f}s"
        self.console.print(line, soft_wrap=True)
        self._refresh()

    def eta_s(self) -> float | None:
        """Seconds left, from the median duration of the attempts so far."""
        if not self.durations:
            return None
        left = max(0, self.total - self.done)
        width = max(1, len(self.in_flight))
        return statistics.median(self.durations) * left / width

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        elapsed = time.monotonic() - self.started
        eta = self.eta_s()
        head = Text(
            f"cell {min(self.done + len(self.in_flight), self.total)} of {self.total} · elapsed {elapsed:.0f}s"
            + (f" · ETA {eta:.0f}s" if eta is not None else "")
            + " · "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        )
        table = Table(box=None, show_header=False, pad_edge=False)
        now = time.monotonic()
        for entry in list(self.in_flight.values()):
            table.add_row(Text(entry.cell.label), entry.phase, f"{now - entry.started:.0f}s")
        return Group(head, table)
