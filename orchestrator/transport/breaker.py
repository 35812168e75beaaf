"""A per-host circuit breaker shared by every connection a sweep opens to one host.

A connection that used up its bounded reconnect attempts declares the host down (`trip`); from then
on every operation on that host fails at once instead of spending its own attempts, until someone
checks the host is back (`half_open` lets one trial through; success `close`s the breaker again).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from orchestrator.errors import ConnectFailed


class HostDown(ConnectFailed):
    """The host was declared down by an earlier operation; nothing was sent to it."""


@dataclass(frozen=True)
class Trip:
    """Why and when the host was declared down."""

    reason: str
    at: float
    """time.time() of the trip."""


class HostBreaker:
    """Closed (the host is up), open (declared down: fail fast) or half-open (one trial let through)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._trip: Trip | None = None
        self._trial = False
        self._reached = False

    @property
    def reached(self) -> bool:
        """Whether any connection of this sweep ever reached the host (so a failed connect is an outage)."""
        return self._reached

    @property
    def tripped(self) -> Trip | None:
        """The trip, while the host is declared down (also during a half-open trial)."""
        return self._trip

    @property
    def refusing(self) -> bool:
        """Whether operations must fail at once (open, and no trial under way)."""
        with self._lock:
            return self._trip is not None and not self._trial

    def connected(self) -> None:
        """A connection to the host was opened: it is up."""
        with self._lock:
            self._reached = True
            self._trip = None
            self._trial = False

    def trip(self, reason: str) -> None:
        """Declare the host down (the first reason is kept until the host is back)."""
        with self._lock:
            self._trial = False
            if self._trip is None:
                self._trip = Trip(reason, time.time())

    def half_open(self) -> None:
        """Let operations through once more, to find out whether the host is back."""
        with self._lock:
            self._trial = self._trip is not None

    def refuse(self, action: str) -> HostDown:
        """The error an operation raises while the host is declared down."""
        trip = self._trip
        when = time.strftime("%H:%M:%S", time.localtime(trip.at)) if trip else "?"
        return HostDown(f"{action}: host {self.host} is down (declared at {when}: {trip.reason if trip else '?'})")
