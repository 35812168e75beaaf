"""A host that dies mid-sweep costs seconds: bounded reconnects, then its breaker fails the rest at once.

Real sweeps on the simulated host over a loopback sshd that the test stops for good (every cell left is
`infra` within seconds, said once), or for ten seconds while the sweep waits for it (`--wait-for-host`).
"""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.config.model import effective_deadlines
from orchestrator.model import Cell, Phase, Status
from orchestrator.store.sqlite import Store
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from tests.fault_harness import EXPECTED, FaultHost
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh

PASSING = "attention-backend=flashinfer, kv-cache-dtype=bf16"



def _sweep(fh: FaultHost, on_event: object, wait_for_host_s: float = 0.0) -> tuple[str, list[str]]:
    """One serial sweep in this process; returns its id and the host lines it announced (and, last, the hosts it
    could not stop or check at its end: `unchecked: HOST (why)`)."""
    matrix, host = fh.matrix(), fh.host()
    said: list[str] = []
    options = SweepOptions(
        packed=False, settings=RunSettings(effective_deadlines(host, matrix), matrix.probes),
        wait_for_host_s=wait_for_host_s,
    )  # fmt: skip
    hooks = SweepHooks(on_event=on_event, on_host=lambda _name, line: said.append(line))  # type: ignore[arg-type]
    with Store(fh.db) as store:
        outcome = run_sweep(store, matrix, [host], options, hooks)
    return outcome.sweep_id, said + [f"unchecked: {name} ({why})" for name, why in outcome.unchecked.items()]


def test_a_host_that_dies_mid_sweep_makes_its_remaining_cells_infra_within_seconds(
    own_sshd: SshdHost, slow_host: FaultHost
) -> None:
    killed: list[float] = []

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if cell.label == PASSING and phase is Phase.SAMPLED_DECODE and not killed:
            killed.append(time.monotonic())
            threading.Thread(target=own_sshd.stop).start()  # the listener and every connection, for good

    sweep_id, said = _sweep(slow_host, on_event)
    ended = time.monotonic()
    assert killed, "the host was killed mid-sweep"
    # Was 20 s per operation, per cell; now one operation's bounded attempts (~6 s), then the rest at once.
    assert ended - killed[0] < 20, f"the sweep took {ended - killed[0]:.1f}s after the host died"
    with Store(slow_host.db) as store:
        results = {r.cell.label: r for r in store.cell_results(sweep_id)}
        assert store.get_sweep(sweep_id).status == "done"
    first = next(iter(EXPECTED))  # the serial sweep runs the passing cell first and the host dies during it
    assert first == PASSING
    assert all(r.status is Status.INFRA for r in results.values()), {k: r.status for k, r in results.items()}
    never_launched = [r for label, r in results.items() if label != PASSING]
    assert len(never_launched) == 3
    assert all("is down" in r.reason and "not launched" in r.reason for r in never_launched), [
        r.reason for r in never_launched
    ]
    announced = [line for line in said if not line.startswith("unchecked: ")]
    assert len([line for line in announced if "is down" in line]) == 1, said  # said once, not per cell
    assert "--wait-for-host" in said[0]
    # The sweep ends naming the host it could not stop or check (the CLI prints it with the resume command).
    assert any(line.startswith(f"unchecked: {slow_host.name} (") for line in said), said


def test_wait_for_host_resumes_the_sweep_when_the_host_comes_back(own_sshd: SshdHost, slow_host: FaultHost) -> None:
    back = threading.Event()

    def outage() -> None:
        own_sshd.stop()
        time.sleep(10.0)  # longer than the bounded reconnect attempts: the host is declared down
        own_sshd.start()
        back.set()

    started: list[threading.Thread] = []

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if cell.label == PASSING and phase is Phase.SAMPLED_DECODE and not started:
            started.append(threading.Thread(target=outage))
            started[0].start()

    sweep_id, said = _sweep(slow_host, on_event, wait_for_host_s=60.0)
    assert started and back.wait(30)
    assert any("is down" in line and "waiting up to 60s" in line for line in said), said
    assert any("is back" in line for line in said), said
    with Store(slow_host.db) as store:
        results = {r.cell.label: r for r in store.cell_results(sweep_id)}
    # Every cell after the outage ran on the host once it was back, to the verdict the scenario dictates.
    for label, (status, phase, category, _attempts) in EXPECTED.items():
        if label == PASSING:
            continue
        row = results[label]
        assert row.status is not None and row.phase is not None and row.category is not None, (label, row)
        assert (row.status.value, row.phase.value, row.category.value) == (status, phase, category), (label, row)
