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
from types import FrameType

from orchestrator.errors import OrchestratorError
from orchestrator.host.session import HostSession
from orchestrator.store.sqlite import Store
from orchestrator.sweep.recover import recover_launch

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

    @property
    def exit_code(self) -> int:
        """What the command exits with."""
        return EXIT_CODES.get(signal.Signals(self.signum), 130)


@dataclass
class Interrupts:
    """Turns SIGINT/SIGTERM into a clean stop of one sweep; `on_signal` lets the CLI say what is happening."""

    open_session: Callable[[], HostSession]
    store: Store
    grace_s: float
    gpu_release_s: float
    on_signal: Callable[[str], None] = lambda _text: None
    sweep_id: str | None = None
    received: int | None = None
    abandoned: list[str] = field(default_factory=list)
    _stopper: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

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
        with contextlib.suppress(OrchestratorError):
            session = self.open_session()
            try:
                for run in self.store.unfinished_runs(self.sweep_id):
                    try:
                        self.store.discard_run(run.run_id)
                    except OrchestratorError:
                        continue  # its worker finished it first: a verdict reached before the signal
                    self.abandoned.append(run.run_id)
                    if run.pgid is not None:
                        with contextlib.suppress(OrchestratorError):
                            session.transport.kill_group(run.pgid, self.grace_s)
            finally:
                session.close()

    def settle(self, exc: SweepInterrupted) -> None:
        """After every worker ended: stop whatever of the abandoned runs still lives, and wait for their GPUs."""
        if self._stopper is not None:
            self._stopper.join()
        if self.sweep_id is None:
            return
        try:
            session = self.open_session()
        except OrchestratorError as error:
            exc.gpus_free = False
            exc.problems.append(f"could not reach the host to check: {error}")
            return
        try:
            gpus: set[int] = set()
            for run in self.store.runs(self.sweep_id):
                if run.run_id not in self.abandoned:
                    continue
                gpus.update(run.gpus)
                # By the run directory's pid file: a launch that started after the signal has no pgid on record.
                launch = recover_launch(session, run) if run.run_dir else None
                if launch is not None and session.launcher.alive(launch):
                    session.launcher.stop(launch, self.grace_s)
                exc.stopped.append(run.run_id)
            released, left = session.wait_gpus_released(tuple(sorted(gpus)), self.gpu_release_s)
            if not released:
                exc.gpus_free = False
                exc.problems.append("GPUs still held: " + ", ".join(f"GPU {h.gpu_index} pid {h.pid}" for h in left))
            self.store.finish_sweep(self.sweep_id, "interrupted")
        except OrchestratorError as error:
            exc.gpus_free = False
            exc.problems.append(str(error))
        finally:
            session.close()


def report_lines(exc: SweepInterrupted, resume_command: str | None) -> list[str]:
    """What the CLI prints after an interrupted sweep: what was stopped, whether the GPUs are free, how to resume."""
    lines = []
    if exc.sweep_id is None:
        return [f"interrupted ({signal.Signals(exc.signum).name}) before the sweep started; nothing was launched"]
    stopped = f"{len(exc.stopped)} server(s) of this sweep stopped" if exc.stopped else "no server was running"
    free = "GPUs verified free" if exc.gpus_free else "GPUs NOT verified free"
    lines.append(f"interrupted ({signal.Signals(exc.signum).name}): sweep {exc.sweep_id}; {stopped}; {free}")
    lines.extend(f"  {p}" for p in exc.problems)
    if resume_command:
        lines.append(f"resume with: {resume_command}")
    return lines
