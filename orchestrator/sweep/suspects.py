"""Hosts whose failures do not follow the flags: a failing GPU, or a cell that fails there and passes elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Suspects:
    """Hosts of a pool whose failures do not follow the flags, said once each; shared by the pool's schedulers.

    A suspect host takes no new cell while a host of its pool that is not suspect remains (a lone host goes on,
    with the warning): its GPUs report hardware faults, or a cell that failed there passed on another host.
    """

    def __init__(self, hosts: list[str], announce: Callable[[str, str], None] = lambda _h, _line: None) -> None:
        self.hosts = hosts
        self.announce = announce
        self.found: dict[str, str] = {}
        self._lock = threading.Lock()

    def mark(self, host: str, why: str) -> None:
        """Mark `host` suspect for `why` (the first reason is kept and said)."""
        with self._lock:
            if host in self.found:
                return
            self.found[host] = why
        others = [h for h in self.hosts if h != host and h not in self.found]
        then = f"its cells go to {', '.join(others)}" if others else "its verdicts may not follow the flags"
        self.announce(host, f"host {host} is suspect: {why}; {then}")

    def avoid(self, host: str) -> bool:
        """Whether `host` should take no new cell (suspect, and some other host of its pool is not)."""
        return host in self.found and any(h not in self.found for h in self.hosts if h != host)
