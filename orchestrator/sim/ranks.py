"""The main process's side of its scheduler ranks: start them, hear them, watch them die, stop them.

Each rank is a forked child of the main process (same process group, same stdout/stderr) with a socketpair
for control: the rank reports `ready`; the main process sends `fail` commands. Forking, rather than starting
a fresh interpreter per rank, keeps an 8-rank launch cheap; every rank is forked before any thread starts.
A rank exiting while the server is not stopping is reported to `on_exit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from orchestrator.sim.rank import STOP_SIGNALS, RankConfig, run_rank


@dataclass
class _Child:
    pid: int
    sock: socket.socket
    exited: threading.Event = field(default_factory=threading.Event)


class RankSet:
    """The running scheduler ranks of one server."""

    def __init__(self, configs: list[RankConfig], on_exit: Callable[[int, int], None]) -> None:
        self.configs = configs
        self.on_exit = on_exit
        """Called with (pid, exit code, negative for a signal) when a rank exits on its own."""
        self.closing = False
        self._children: list[_Child] = []
        self._ready = 0
        self._cond = threading.Condition()

    def start(self) -> None:
        """Fork every rank, then start listening to them."""
        pairs = [socket.socketpair() for _ in self.configs]
        # A stop signal handled between a fork and its bookkeeping would leave that rank unknown, unkilled.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            for index, config in enumerate(self.configs):
                pid = os.fork()
                if pid == 0:
                    _become_rank(config, index, pairs)
                pairs[index][1].close()
                self._children.append(_Child(pid, pairs[index][0]))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for child in self._children:
            threading.Thread(target=self._listen, args=(child,), daemon=True).start()
            threading.Thread(target=self._watch, args=(child,), daemon=True).start()

    def wait_ready(self) -> None:
        """Block until every rank has said `ready`."""
        with self._cond:
            while self._ready < len(self.configs):
                self._cond.wait(timeout=1.0)

    def send(self, rank: int, message: dict[str, Any]) -> bool:
        """Send one command to a rank; False when it can no longer hear."""
        try:
            self._children[rank].sock.sendall(json.dumps(message).encode() + b"\n")
        except (OSError, IndexError):
            return False
        return True

    def kill(self) -> None:
        """SIGKILL every rank and wait until it is reaped (what SGLang's kill_process_tree does)."""
        self.closing = True
        for child in self._children:
            _signal(child, signal.SIGKILL)
        for child in self._children:
            child.exited.wait(2.0)

    def terminate(self, grace: float) -> None:
        """SIGTERM every rank, and SIGKILL those still there after `grace` seconds."""
        self.closing = True
        for child in self._children:
            _signal(child, signal.SIGTERM)
        for child in self._children:
            if not child.exited.wait(grace):
                _signal(child, signal.SIGKILL)
                child.exited.wait(2.0)

    def _listen(self, child: _Child) -> None:
        # A rank that dies resets its socket; its death is reported by _watch, not here.
        with contextlib.suppress(OSError):
            for line in child.sock.makefile("r", encoding="utf-8"):
                if json.loads(line).get("event") == "ready":
                    with self._cond:
                        self._ready += 1
                        self._cond.notify_all()

    def _watch(self, child: _Child) -> None:
        _, status = os.waitpid(child.pid, 0)
        child.exited.set()
        if not self.closing:
            self.on_exit(child.pid, os.waitstatus_to_exitcode(status))


def _become_rank(config: RankConfig, index: int, pairs: list[tuple[socket.socket, socket.socket]]) -> NoReturn:
    """In the forked child: keep only this rank's end of its own socketpair, then run the rank."""
    try:
        for other, (ours, theirs) in enumerate(pairs):
            ours.close()
            if other != index:
                theirs.close()
        run_rank(config, pairs[index][1])
    finally:
        os._exit(1)


def _signal(child: _Child, sig: int) -> None:
    # Once reaped, the pid may already belong to somebody else.
    if not child.exited.is_set():
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, sig)
