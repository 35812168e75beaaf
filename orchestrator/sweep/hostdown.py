"""Whether a host may take more cells: its circuit breaker, and how long to wait for it once it is down.

A dead host costs one operation's bounded reconnect attempts (seconds); then the breaker is open, the
sweep says so once, and the host's remaining cells are `infra` at once, or, with `--wait-for-host`, the
host is tried again every few seconds until that long after it went down.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchestrator.classify.unlaunched import infra_verdict
from orchestrator.errors import OrchestratorError
from orchestrator.model import Phase, Verdict
from orchestrator.transport.breaker import HostBreaker, HostDown

RETRY_EVERY_S = 3.0
"""How often a host that is down is tried again while waiting for it."""

Announce = Callable[[str, str], None]
"""(host name, one line to show the user)."""


class HostWatch:
    """One host's state as the scheduler sees it; `up()` is asked before every round of starts."""

    def __init__(
        self,
        name: str,
        breaker: HostBreaker,
        *,
        wait_s: float = 0.0,
        check: Callable[[], object],
        announce: Announce,
        sleep: Callable[[float], None] = time.sleep,
        pooled: bool = False,
    ) -> None:
        self.name = name
        self.breaker = breaker
        self.wait_s = max(0.0, wait_s)
        self.pooled = pooled
        """One host of a pool: its queued cells go to the others while it is down, rather than being infra."""
        self._check = check
        self._announce = announce
        self._sleep = sleep
        self._announced_at: float | None = None

    def say_down(self, then: str = "") -> bool:
        """Tell the user, once per outage, that the host is down and what `then` happens; True while it is.

        Asked before every round of starts (`up`) and when the host's scheduler ends: the host may go down
        on its last cell in flight, with nothing left queued for it, and that must be said too.
        """
        trip = self.breaker.tripped
        if trip is None:
            return False
        if self._announced_at != trip.at:
            self._announced_at = trip.at
            self._announce(self.name, f"host {self.name} is down ({trip.reason}); {then or self._what_next()}")
        return True

    def _what_next(self) -> str:
        if self.wait_s:
            return f"waiting up to {self.wait_s:g}s for it to come back (--wait-for-host)"
        if self.pooled:
            return "the pool's hosts still up run its queued cells (pass --wait-for-host DURATION to wait for it)"
        return "its remaining cells are infra (pass --wait-for-host DURATION to wait for it)"

    def up(self) -> bool:
        """True when the host takes cells; blocks while waiting for a host that is down (`wait_s`)."""
        if not self.say_down():
            return True
        trip = self.breaker.tripped
        if trip is None:
            return True  # came back (closed by another connection) since say_down looked
        deadline = trip.at + self.wait_s
        while (left := deadline - time.time()) > 0:
            self._sleep(min(RETRY_EVERY_S, left))
            self.breaker.half_open()
            try:
                self._check()
            except OrchestratorError:
                self.breaker.trip(trip.reason)  # the trial failed: still down, first reason kept
                continue
            self.breaker.connected()
            self._announce(self.name, f"host {self.name} is back; its cells run again")
            return True
        return False

    def down_verdict(self) -> Verdict:
        """The verdict of a cell not launched because its host is down."""
        trip = self.breaker.tripped
        error = self.breaker.refuse("not launched") if trip else HostDown(f"not launched: host {self.name} is down")
        return infra_verdict(error, Phase.PREFLIGHT)
