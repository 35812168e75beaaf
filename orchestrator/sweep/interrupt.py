"""Ctrl-C and SIGTERM of a sweep: stop this sweep's servers, check their GPUs are free, say how to resume.

On the first signal the in-flight runs are marked abandoned (so the worker threads following them can
record nothing: their cells run again on `--resume`) and their process groups are stopped, from a
thread of its own, while the main thread unwinds. The workers then see their servers gone and end
within seconds instead of following a launch for its whole deadline. Once every worker has ended (no
launch can start after that), `settle` stops anything of those runs still alive by its run directory,
even a launch that started in the moment between the signal and its record, and waits for the GPUs.
Later signals while stopping are reported and otherwise ignored: leaving now would leave servers.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from types import FrameType

from orchestrator.errors import OrchestratorError
from orchestrator.host.session import HostSession
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.recover import recorded_launch, recover_launch

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""128 + the signal's number, as a shell reports a command a signal ended."""


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by a signal; a KeyboardInterrupt so that no `except Exception` swallows it."""

    def __init__(self, signum: int, sweep_id: str | None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.sweep_id = sweep_id
        self.stopped: list[str] = []
        """Run ids whose servers were stopped."""
        self.gpus_free = True
        self.problems: list[str] = []
        self.unchecked: dict[str, str] = {}
        """Host -> why its servers could not be stopped or its GPUs checked."""

    @property
    def exit_code(self) -> int:
        """What the command exits with."""
        return EXIT_CODES.get(signal.Signals(self.signum), 130)


@dataclass
class Interrupts:
    """Turns SIGINT/SIGTERM into a clean stop of one sweep; `on_signal` lets the CLI say what is happening.

    Each run is stopped on the host that launched it, over a session to that host: a process group number
    is only meaningful in its own host's process table (on another host it may be anyone's).
    """

    open_session: Callable[[str], HostSession]
    """A new session to the host of that name (a sweep's hosts, by their hosts.yaml name)."""
    store: Store
    grace_s: float
    gpu_release_s: float
    on_signal: Callable[[str], None] = lambda _text: None
    sweep_id: str | None = None
    received: int | None = None
    abandoned: list[RunRecord] = field(default_factory=list)
    _stopper: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _unreached: dict[str, str] = field(default_factory=dict)
    """Host -> why it could not be reached while stopping (its runs' servers may still run)."""

    def started(self, sweep_id: str) -> None:
        """The sweep's record exists: from now on a signal stops its runs."""
        self.sweep_id = sweep_id

    @property
    def stopping(self) -> bool:
        """Whether a signal arrived (worker threads start no launch after it)."""
        return self._stopping.is_set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Handle SIGINT and SIGTERM while the block runs (only the main thread can; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.getsignal(s) for s in SIGNALS}
        for sig in SIGNALS:
            signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:
            self.on_signal(f"{name} again: still stopping the servers of this sweep (they must not outlive it)")
            return
        self.received = signum
        self._stopping.set()
        self.on_signal(
            f"{name}: stopping the servers of sweep {self.sweep_id}, then checking their GPUs are free"
            if self.sweep_id
            else f"{name}: stopping before the sweep started; nothing was launched"
        )
        if self.sweep_id is not None:
            self._stopper = threading.Thread(target=self._stop_in_flight, name="interrupt-stop", daemon=True)
            self._stopper.start()
        raise SweepInterrupted(signum, self.sweep_id)

    def _stop_in_flight(self) -> None:
        """Abandon every unfinished run of the sweep (no worker can finish it after this), then stop its group."""
        assert self.sweep_id is not None
        by_host: dict[str, list[RunRecord]] = {}
        for run in self.store.unfinished_runs(self.sweep_id):
            try:
                self.store.discard_run(run.run_id)
            except OrchestratorError:
                continue  # its worker finished it first: a verdict reached before the signal
            self.abandoned.append(run)
            by_host.setdefault(run.host, []).append(run)
        for host, runs in by_host.items():
            self._on_host(host, partial(self._kill_groups, runs=runs))

    def _kill_groups(self, session: HostSession, *, runs: list[RunRecord]) -> None:
        for run in runs:
            with contextlib.suppress(OrchestratorError):
                session.placement.end_unfinished(recorded_launch(run), self.grace_s)

    def _on_host(self, host: str, work: Callable[[HostSession], None]) -> bool:
        """Run `work` over a new session to `host`; False (and the reason kept) when the host cannot be reached."""
        try:
            session = self.open_session(host)
        except OrchestratorError as error:
            self._unreached.setdefault(host, str(error))
            return False
        try:
            work(session)
            return True
        except OrchestratorError as error:
            self._unreached.setdefault(host, str(error))
            return False
        finally:
            session.close()

    def settle(self, exc: SweepInterrupted) -> None:
        """After every worker ended: stop whatever of the abandoned runs still lives, and wait for their GPUs.

        Host by host: a host that cannot be reached is named, and its GPUs are not called free.
        """
        if self._stopper is not None:
            self._stopper.join()
        if self.sweep_id is None:
            return
        by_host: dict[str, list[RunRecord]] = {}
        for run in self.abandoned:
            by_host.setdefault(run.host, []).append(run)
        for host, runs in by_host.items():
            self._unreached.pop(host, None)  # tried again: it may have been only slow to answer the first stop
            if not self._on_host(host, partial(self._settle_host, runs=runs, exc=exc)):
                exc.gpus_free = False
                exc.unchecked[host] = self._unreached.get(host, "not reached")
        try:
            self.store.finish_sweep(self.sweep_id, "interrupted")
        except OrchestratorError as error:
            exc.problems.append(f"the store could not record the interruption: {error}")

    def _settle_host(self, session: HostSession, *, runs: list[RunRecord], exc: SweepInterrupted) -> None:
        gpus: set[int] = set()
        for run in runs:
            # Read again: a launch that started after the signal has its run directory recorded since.
            current = self.store.get_run(run.run_id)
            gpus.update(current.gpus)
            # By the run directory's pid file: a launch that started after the signal has no pgid on record.
            launch = recover_launch(session, current) if current.run_dir else None
            if launch is not None and session.launcher.alive(launch):
                session.launcher.stop(launch, self.grace_s)
            exc.stopped.append(run.run_id)
        released, left = session.placement.wait_released(tuple(sorted(gpus)), self.gpu_release_s)
        if not released:
            exc.gpus_free = False
            exc.problems.append(
                f"{session.config.name}: GPUs still held: " + ", ".join(f"GPU {h.gpu_index} pid {h.pid}" for h in left)
            )


def report_lines(exc: SweepInterrupted, resume_command: str | None) -> list[str]:
    """What the CLI prints after an interrupted sweep: what was stopped, whether the GPUs are free, how to resume."""
    lines = []
    if exc.sweep_id is None:
        return [f"interrupted ({signal.Signals(exc.signum).name}) before the sweep started; nothing was launched"]
    stopped = f"{len(exc.stopped)} server(s) of this sweep stopped" if exc.stopped else "no server was running"
    free = "GPUs verified free" if exc.gpus_free else "GPUs NOT verified free"
    lines.append(f"interrupted ({signal.Signals(exc.signum).name}): sweep {exc.sweep_id}; {stopped}; {free}")
    lines.extend(
        f"  host {host}: could not stop its servers or check its GPUs ({why}); `--resume` stops them once it is back"
        for host, why in exc.unchecked.items()
    )
    lines.extend(f"  {p}" for p in exc.problems)
    if resume_command:
        lines.append(f"resume with: {resume_command}")
    return lines
