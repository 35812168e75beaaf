"""One command's session channel read to its end: stdout and stderr as bytes, the exit status, or why not."""

from __future__ import annotations

import select
import time
from collections.abc import Callable

import paramiko

from orchestrator.errors import CommandTimeout, ConnectionLost
from orchestrator.transport.base import CommandResult

_CHUNK = 65536


def collect(
    chan: paramiko.Channel, deadline: float, timed_out: Callable[[], CommandTimeout], dropped: str
) -> CommandResult:
    """Read `chan` until the command exits; `timed_out()` is raised past `deadline`, ConnectionLost(`dropped`)
    when the connection died before the exit status arrived."""
    out: list[bytes] = []
    err: list[bytes] = []
    ready = chan.fileno()  # becomes readable on stdout or stderr data, EOF and close
    while True:
        _drain(chan, out, err)
        if chan.eof_received or chan.closed:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out()
        select.select([ready], [], [], remaining)
    _drain(chan, out, err)
    if not chan.status_event.wait(max(deadline - time.monotonic(), 0.0)):
        raise timed_out()
    transport = chan.get_transport()
    if chan.exit_status == -1 and (transport is None or not transport.is_active()):
        raise ConnectionLost(dropped)
    return CommandResult(chan.exit_status, b"".join(out), b"".join(err))


def _drain(chan: paramiko.Channel, out: list[bytes], err: list[bytes]) -> None:
    while chan.recv_ready():
        out.append(chan.recv(_CHUNK))
    while chan.recv_stderr_ready():
        err.append(chan.recv_stderr(_CHUNK))
