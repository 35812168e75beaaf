"""A host held for one sweep: an open session and the host's lock, released and closed however the work ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.config.model import HostConfig
from orchestrator.host.lock import HostLock
from orchestrator.host.session import HostSession


@contextmanager
def holding_host(host: HostConfig, sweep_id: str) -> Iterator[HostSession]:
    """Connect to `host` and take its lock for `sweep_id` (a second sweep is refused naming the first)."""
    session = HostSession.open(host)
    try:
        lock = HostLock(session.transport, session.workdir, sweep_id)
        # Before preflight: a second sweep is refused naming the first, not for the GPUs the first one holds.
        lock.acquire()
        try:
            yield session
        finally:
            lock.release()
    finally:
        session.close()
