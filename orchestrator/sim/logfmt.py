"""SGLang's log line format and an unbuffered writer that several processes can share.

`configure_logger` in SGLang formats `[%(asctime)s{prefix}] %(message)s` with `%Y-%m-%d %H:%M:%S`; scheduler
processes add ` TP{rank}` when tp > 1, the main process adds nothing. Uvicorn's lines carry the same
timestamp prefix in recent releases.
"""

from __future__ import annotations

import os
import threading
import time

STDOUT = 1
STDERR = 2


def stamp() -> str:
    """The timestamp as SGLang's logger prints it."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


def rank_tag(rank: int, tp_size: int) -> str:
    """The prefix suffix of a scheduler rank: ` TP0` with tensor parallelism, nothing without."""
    return f" TP{rank}" if tp_size > 1 else ""


def fmt(message: str, tag: str = "") -> str:
    """One log line: `[2026-01-01 12:00:00 TP0] message`."""
    return f"[{stamp()}{tag}] {message}"


class LogWriter:
    """Writes whole lines straight to a file descriptor, one write() per call.

    Every rank process shares the launcher's server.log; a single write() per block keeps a traceback from
    being interleaved with another rank's lines, and nothing sits in a buffer when a process is killed.
    """

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        # Re-entrant: a signal handler running on the main thread may log while that thread is mid-write.
        self._lock = threading.RLock()

    def info(self, *messages: str) -> None:
        """Log messages with the timestamp prefix."""
        self.raw(*(fmt(m, self.tag) for m in messages))

    def raw(self, *lines: str, fd: int = STDOUT) -> None:
        """Write lines exactly as given."""
        data = "".join(f"{line}\n" for line in lines).encode()
        with self._lock:
            while data:
                try:
                    written = os.write(fd, data)
                except BrokenPipeError:
                    return
                data = data[written:]
