"""The live view of a sweep: cell i of N, what each launch in flight is doing, counts, and an ETA.

On a terminal it is a rich Live panel; elsewhere (a log file, CI) one line per finished attempt,
so an overnight sweep's output still reads well in the morning.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.model import Cell, Phase, Status, Verdict
from orchestrator.retries import port_race, retries_owed, retry_class
from orchestrator.settings import RetryPolicy
from orchestrator.store.results import row_status
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.execute import QUEUED_EVENT
from orchestrator.sweep.preflight import Preflight

RATE_WINDOW = 10
"""Results the ETA's time per attempt is measured over (the latest ones)."""
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
    """Receives sweep events (from worker threads) and keeps the display current.

    Counts follow the table's rules (store/results.row_status: a cell whose attempts disagree counts as `fail`,
    once; an infra attempt after a proof does not change it), and a cell is done when the retry rule the scheduler
    applies (retries.decide_after) owes it no attempt. The ETA counts attempts, not cells: a failing cell is retried
    (`retries:`), and the share of first attempts failing so far says how many of the cells left will be.
    """

    def __init__(
        self,
        console: Console,
        total: int = 0,
        *,
        retries: int = 0,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console = console
        self.total = total
        self.retries = max(0, retries)
        self.policy = policy or RetryPolicy()
        self.clock = clock
        self.done = 0
        self.invalid = 0
        self.valid = total
        self.attempts: dict[str, list[Verdict]] = {}
        """Cell id -> the verdict of each of its finished attempts, in order."""
        self.counts: Counter[str] = Counter()
        self.durations: list[float] = []
        self.in_flight: dict[str, _InFlight] = {}
        self.started = clock()
        self.first_launch: float | None = None
        self.ends: list[float] = []
        """When each timed attempt ended."""
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

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The live panel off while the user is asked something (a prompt under a redrawn panel is lost)."""
        live = self._live
        if live is not None:
            live.stop()
        try:
            yield
        finally:
            if live is not None:
                live.start()

    def on_plan(self, preflight: Preflight) -> None:
        """Preflight is done: the cells to run are known."""
        with self._lock:
            self.total = len(preflight.plans)
            self.invalid = len(preflight.invalid)
            self.valid = self.total - self.invalid
            self._recount()
        self.console.print(
            f"preflight {preflight.seconds:.1f}s: {len(preflight.valid)} cells to launch, "
            f"{len(preflight.invalid)} invalid; " + ", ".join(f"{k} {v}" for k, v in preflight.versions.items() if v)
        )
        for plan in preflight.invalid:
            line = f"* {escape(plan.cell.label)}: [yellow]invalid[/] ({escape(plan.reason)})"
            self.console.print(line, soft_wrap=True)
        for note in dict.fromkeys(n for plan in preflight.valid for n in plan.notes):
            self.console.print(f"* note: {escape(note)}", soft_wrap=True)
        self._refresh()

    def seed(self, verdicts: dict[str, list[Verdict]]) -> None:
        """Attempts that reached their verdicts before this process (a resumed sweep): counted, not timed."""
        with self._lock:
            for cell_id, attempts in verdicts.items():
                self.attempts.setdefault(cell_id, []).extend(attempts)
            self._recount()
    def on_grow(self, cells: list[Cell], why: str) -> None:
        """The plan grew by `cells` (adaptive localisation, or a fuller resume)."""
        if not cells:
            return
        with self._lock:
            self.total += len(cells)
        shown = "; ".join(c.label for c in cells[:4]) + ("; ..." if len(cells) > 4 else "")
        self.console.print(f"{why}: +{len(cells)} cells ({escape(shown)})", soft_wrap=True)
        self._refresh()

    def on_event(self, cell: Cell, event: str, phase: Phase | None) -> None:
        """A launch moved on (launched, reached a phase, started a probe)."""
        with self._lock:
            now = self.clock()
            if self.first_launch is None:
                self.first_launch = now
            entry = self.in_flight.setdefault(cell.cell_id, _InFlight(cell, now))
            entry.phase = phase.value if phase else event
            if event.startswith(QUEUED_EVENT):  # the launch's time starts when its job runs, not in the queue
                entry.started = time.monotonic()
        self._refresh()

    def on_result(self, result: AttemptResult) -> None:
        """An attempt ended with a verdict."""
        verdict = result.verdict
        with self._lock:
            entry = self.in_flight.pop(result.cell.cell_id, None)
            took = self.clock() - entry.started if entry else 0.0
            if entry:
                self.durations.append(took)
                self.ends.append(self.clock())
            attempts = self.attempts.setdefault(result.cell.cell_id, [])
            attempts.append(verdict)
            self._recount()
            cell_status = row_status([v.status for v in attempts])
        style = STATUS_STYLE.get(verdict.status, "")
        why = f" at {verdict.phase.value}" if verdict.phase and verdict.status is not Status.PASS else ""
        cause = f" {verdict.category.value}" if verdict.status is not Status.PASS else ""
        # A retry says so, so two lines of one cell in a log read as two attempts, not a duplicate.
        retry = self._which_launch(attempts)
        flaky = ": flaky, counted as fail" if cell_status is Status.FAIL and verdict.status is Status.PASS else ""
        # Flag values are the user's text: `[/]` in one must print as itself, not as rich markup.
        eta = self.eta_s()
        # In a log (no live panel) the line is the only progress report: where the sweep is and when it should end.
        where = f" · {self.done} of {self.total} cells done" + (f", ETA {_duration(eta)}" if eta is not None else "")
        line = (
            f"* {escape(result.cell.label)}{retry}: [{style}]{verdict.status.value}[/]{why}{cause}{flaky}, "
            f"took {took:.1f}s{where}"
        )
        self.console.print(line, soft_wrap=True)
        self._refresh()

    def _recount(self) -> None:
        """Cells done and counts by status, as the table will show them (call with the lock held)."""
        cells = {cell: row_status([v.status for v in s]) for cell, s in self.attempts.items()}
        self.counts = Counter(status.value for status in cells.values())
        if self.invalid:
            self.counts[Status.INVALID.value] += self.invalid
        finished = sum(not self._owes_attempts(s) for s in self.attempts.values())
        self.done = self.invalid + finished

    def _owes_attempts(self, attempts: list[Verdict]) -> bool:
        """Whether a cell with these attempts will be run again (the scheduler's rule)."""
        return retries_owed(attempts, self.policy, self.retries)

    def _which_launch(self, attempts: list[Verdict]) -> str:
        """` (retry N of M)` on a retry's line, so two lines of one cell in a log read as two attempts, not a
        duplicate; a relaunch after a port race says so (it uses up no retry)."""
        if len(attempts) < 2:
            return ""
        earlier = attempts[:-1]
        if port_race(earlier[-1]):
            return " (relaunched on another port)"
        kind = retry_class(earlier[-1])
        allowed = self.policy.retries(kind, self.retries) if kind is not None else self.retries
        return f" (retry {len(earlier) - sum(map(port_race, earlier))} of {allowed})"

    def attempts_left(self) -> float:
        """Expected attempts still to run (the one in flight counted by the share of a median attempt it has had)."""
        firsts = [s[0].status for s in self.attempts.values()]
        fail_share = sum(s in _RETRIED for s in firsts) / len(firsts) if firsts else 0.0
        untouched = max(0, self.valid - len(self.attempts))
        left = untouched * (1 + fail_share * self.retries)
        left += sum(max(1, 1 + self.retries - len(s)) for s in self.attempts.values() if self._owes_attempts(s))
        typical = statistics.median(self.durations) if self.durations else None
        if typical:
            now = self.clock()
            left -= sum(min(0.9, (now - e.started) / typical) for e in self.in_flight.values())
        return max(0.0, left)

    def eta_s(self) -> float | None:
        """Seconds left: expected attempts left times the wall time an attempt has taken lately, packing included.

        Lately: over the last RATE_WINDOW results (since the first launch until there are that many), so a
        host that speeds up or slows down, or a matrix whose later cells fail sooner, moves the ETA with it.
        """
        with self._lock:
            if not self.durations or self.first_launch is None:
                return None
            now = self.clock()
            typical = statistics.median(self.durations)
            if len(self.ends) > RATE_WINDOW:
                # Packed launches end in waves: count what ended after the window opened, not at its edge.
                since = self.ends[-RATE_WINDOW - 1]
                finished = sum(end > since for end in self.ends[-RATE_WINDOW - 1 :])
            else:
                since, finished = self.first_launch, len(self.ends)
            # Attempts' worth of work done in that time: those finished, and the share of those in flight.
            flying = sum(min(0.9, (now - max(e.started, since)) / typical) for e in self.in_flight.values())
            per_attempt = (now - since) / max(finished + flying, 1e-9)
            return self.attempts_left() * per_attempt

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        elapsed = self.clock() - self.started
        eta = self.eta_s()
        with self._lock:
            head = Text(
                f"cell {min(self.done + len(self.in_flight), self.total)} of {self.total} · elapsed {elapsed:.0f}s"
                + (f" · ETA {_duration(eta)}" if eta is not None else "")
                + " · "
                + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
            )
            flying = list(self.in_flight.values())
        table = Table(box=None, show_header=False, pad_edge=False)
        now = self.clock()
        for entry in flying:
            table.add_row(Text(entry.cell.label), entry.phase, f"{now - entry.started:.0f}s")
        return Group(head, table)


_RETRIED = (Status.FAIL, Status.INFRA)


def _duration(seconds: float) -> str:
    """`42s`, `7m05s`, `2h13m`: an ETA as a person reads it."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


