"""SIGTERM as Ctrl-C while a sweep drives a batch scheduler, so its jobs are cancelled on the way out.

A launch on a host of ours outlives the orchestrator and is re-attached by `--resume`; a Slurm job
left queued would start later with nobody watching, holding GPUs of a shared cluster. KeyboardInterrupt
unwinds to the scheduler, which cancels every job it submitted (Launcher.abandon) before it exits.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def terminate_as_interrupt(enabled: bool) -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (when `enabled`).

    Only where nobody handles SIGTERM yet: the command line's own handler (sweep/interrupt.py) already
    stops the sweep cleanly, batch jobs included.
    """
    if (
        not enabled
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
