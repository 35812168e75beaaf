"""The speed load's locking rule: one load at a time per host, the hosts of a pool side by side.

The servers are fakes (a ProbeClient whose two load endpoints answer from memory): what is tested is
when each load runs, not what it measures (tests/probe/test_load.py does that on real servers).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from orchestrator.errors import ProbeError
from orchestrator.probe.client import ProbeClient
from orchestrator.probe.load import host_lock, run_load
from orchestrator.probe.wire import ChatReply
from orchestrator.settings import LoadSettings, ProbeSettings

PROBES = ProbeSettings(model="m")
LOAD = LoadSettings(requests=2, concurrency=2, input_len=8, output_len=16, repeat=1)
PARIS = " Paris. It is the largest city in France and its capital."


class FakeServer(ProbeClient):
    """One server's load endpoints: each chat answers PARIS in `output_len` chunks after `delay_s`.

    `meet`, when set, is a barrier every server's first request waits at: it is only passed when
    that many loads are in flight at once (else the request fails, and the load has no figure).
    """

    def __init__(self, name: str, log: list[tuple[str, float, float]], *, delay_s: float = 0.0,
                 meet: threading.Barrier | None = None) -> None:  # fmt: skip
        super().__init__("http://127.0.0.1:9")  # never dialled: both endpoints the load uses are answered here
        self.name, self.log, self.delay_s, self.meet = name, log, delay_s, meet
        self._first_sent = False
        self._first_guard = threading.Lock()

    def models(self) -> list[str]:
        return ["m"]

    def chat_stream(self, messages: Any, *, model: str, temperature: float, top_p: float, max_tokens: int,
                    timeout: float | None = None, extra: dict[str, Any] | None = None) -> ChatReply:  # fmt: skip
        began = time.monotonic()
        with self._first_guard:  # one request per load meets the others: never two of its own
            first, self._first_sent = not self._first_sent, True
        if self.meet is not None and first:
            try:
                self.meet.wait()
            except threading.BrokenBarrierError as exc:
                raise ProbeError(f"{self.name}: no other host's load ran beside this one") from exc
        time.sleep(self.delay_s)
        self.log.append((self.name, began, time.monotonic()))
        times = tuple(0.001 * (i + 1) for i in range(max_tokens))
        return ChatReply(PARIS, max_tokens, times[-1], "length", {}, chunks=max_tokens, chunk_times=times)


def _loads(runs: list[tuple[FakeServer, str]]) -> dict[str, dict[str, Any]]:
    """Run each (server, host) load in a thread of its own, all at once; each server's `speed`."""
    speeds: dict[str, dict[str, Any]] = {}

    def one(server: FakeServer, host: str) -> None:
        speeds[server.name] = run_load(server, PROBES, LOAD, timeout=5, host=host)

    threads = [threading.Thread(target=one, args=run) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return speeds


def test_two_hosts_of_a_pool_load_at_the_same_time() -> None:
    log: list[tuple[str, float, float]] = []
    meet = threading.Barrier(2, timeout=5)
    a, b = FakeServer("a", log, meet=meet), FakeServer("b", log, meet=meet)
    speeds = _loads([(a, "pool-a"), (b, "pool-b")])
    # Each load's first request waited at the barrier until the other host's load sent one too.
    assert speeds["a"]["valid"] is True and speeds["b"]["valid"] is True, (speeds["a"]["why"], speeds["b"]["why"])
    assert not meet.broken and speeds["a"]["waited_s"] < 1 and speeds["b"]["waited_s"] < 1


def test_the_cells_of_one_host_load_one_after_the_other() -> None:
    log: list[tuple[str, float, float]] = []
    first, second = FakeServer("first", log, delay_s=0.05), FakeServer("second", log, delay_s=0.05)
    speeds = _loads([(first, "box"), (second, "box")])
    assert all(s["valid"] for s in speeds.values()) and len(log) == 4
    spans = {name: (min(b for n, b, _ in log if n == name), max(e for n, _, e in log if n == name))
             for name in ("first", "second")}  # fmt: skip
    (_, end_one), (start_two, _) = sorted(spans.values())
    # The later load sent its first request only after the earlier one's last answer: never side by side.
    assert start_two >= end_one
    # And it says it waited (about one 50 ms round of the other's), a wait that is in no figure.
    assert max(s["waited_s"] for s in speeds.values()) >= 0.04


def test_a_host_is_one_lock_whoever_asks_and_two_hosts_are_two() -> None:
    assert host_lock("box") is host_lock("box") and host_lock("box") is not host_lock("other")
