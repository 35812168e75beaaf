"""SSH faults in the middle of real sweeps on the simulated host over a loopback sshd.

The connection is cut (every per-connection sshd killed) while a probe is in flight, sshd is
stopped mid-probe and started again 2 s later, and a single `orchestrator run` loses its connection
mid-probes: each time the sweep completes with the verdicts the scenario dictates, every cell once,
every launch once, and the server that was running when the connection dropped is probed again, not
relaunched.
Unknown and changed host keys are refused by `orchestrator sweep` and `run` with the way to accept them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from orchestrator.model import Cell, Phase
from orchestrator.store.sqlite import Store
from tests.fault_harness import EXPECTED, FaultHost, sweep_in_process
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh

PASSING = "attention-backend=flashinfer, kv-cache-dtype=bf16"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKxQ2F0i8yBkt1dXyF3cvT7qJw1jxvB9ZD7cW9u0z1c3"



def _access_lines(fh: FaultHost, label: str, request: str) -> int:
    """How often the server of the cell with `label` logged answering `request` (e.g. `POST /generate`)."""
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        cells = {c.cell_id: c.label for c in store.get_cells(sweep.sweep_id)}
        runs = [r for r in store.runs(sweep.sweep_id) if cells[r.cell_id] == label]
    assert len(runs) == 1 and runs[0].run_dir
    return Path(runs[0].run_dir, "server.log").read_text().count(f'"{request} HTTP/1.1" 200')


def _assert_each_cell_launched_once(fh: FaultHost) -> None:
    counts = fh.launch_counts()
    assert counts == {"run_dirs": 4, "pid_files": 4, "server_args": 4, "sim_launches": 4}, counts
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None and sweep.status == "done"
        runs = store.runs(sweep.sweep_id)
    assert sorted(r.state for r in runs) == ["done"] * 4
    assert len({r.cell_id for r in runs}) == 4


class Cutter:
    """An on_event hook that kills every SSH connection 0.25 s into the first probe of each of `phases` of one cell."""

    def __init__(self, sshd: SshdHost, label: str, phases: set[Phase]) -> None:
        self.sshd = sshd
        self.label = label
        self.phases = set(phases)
        self.cuts: list[list[int]] = []
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def __call__(self, cell: Cell, event: str, phase: Phase | None) -> None:
        with self._lock:
            if event != "probe" or cell.label != self.label or phase not in self.phases:
                return
            self.phases.discard(phase)
            timer = threading.Timer(0.25, lambda: self.cuts.append(self.sshd.kill_connections()))
            self._timers.append(timer)
        timer.start()

    def wait(self) -> list[list[int]]:
        """Wait for the cuts scheduled so far and return the pids each one killed."""
        for timer in self._timers:
            timer.join()
        return self.cuts


def _probe_sequences(fh: FaultHost, label: str) -> int:
    """How many probe sequences the one server of the cell with `label` answered (its greedy requests).

    The server's own warm-up is a `POST /generate` too, and is not counted.
    """
    return _access_lines(fh, label, "POST /generate") - 1


def test_connection_cut_during_sampled_and_concurrent_probes_reprobes_the_same_server(
    own_sshd: SshdHost, slow_host: FaultHost
) -> None:
    cutter = Cutter(own_sshd, PASSING, {Phase.SAMPLED_DECODE, Phase.CONCURRENT_DECODE})
    sweep_in_process(slow_host, on_event=cutter)
    cuts = cutter.wait()
    assert len(cuts) == 2 and all(cuts), "both cuts killed live connections"
    assert slow_host.table() == EXPECTED
    _assert_each_cell_launched_once(slow_host)
    assert _probe_sequences(slow_host, PASSING) == 3  # cut twice, so probed three times, on the one server
    assert slow_host.leftovers() == []


def test_sshd_down_for_two_seconds_mid_sweep_completes_without_relaunching(
    own_sshd: SshdHost, slow_host: FaultHost
) -> None:
    restarted = threading.Event()
    logins = own_sshd.accepted_logins()

    def outage() -> None:
        own_sshd.stop()  # the listener and every connection: as `systemctl restart ssh` on a slow day
        time.sleep(2.0)
        own_sshd.start()
        restarted.set()

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if cell.label == PASSING and phase is Phase.SAMPLED_DECODE and not timers:
            timers.append(threading.Timer(0.25, outage))
            timers[0].start()

    timers: list[threading.Timer] = []
    sweep_in_process(slow_host, on_event=on_event)
    assert timers and restarted.wait(10)
    assert slow_host.table() == EXPECTED
    _assert_each_cell_launched_once(slow_host)
    assert _probe_sequences(slow_host, PASSING) == 2
    assert own_sshd.accepted_logins() > logins
    assert slow_host.leftovers() == []


def test_run_over_ssh_with_its_connection_cut_mid_probes_launches_once(
    own_sshd: SshdHost, slow_host: FaultHost
) -> None:
    proc = slow_host.spawn("run", "--", "--model-path", "/models/tiny", "--attention-backend", "flashinfer")
    assert proc.stdout is not None
    lines = []
    cuts: list[list[int]] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "sampled_decode" in line and not cuts:
                time.sleep(0.25)
                cuts.append(own_sshd.kill_connections())
        assert proc.wait(timeout=60) == 0, "".join(lines)
    finally:
        proc.kill()
        proc.wait()
    output = "".join(lines)
    assert cuts and cuts[0], "the connection was cut"
    assert "pass" in output and "healthy" in output, output
    counts = slow_host.launch_counts()
    assert counts == {"run_dirs": 1, "pid_files": 1, "server_args": 1, "sim_launches": 1}, counts
    assert slow_host.leftovers() == []


@pytest.mark.parametrize("command", ["sweep", "run"])
@pytest.mark.parametrize("known", ["unknown", "changed"])
def test_cli_refuses_a_bad_host_key_and_says_how_to_accept_it(
    sshd: SshdHost, tmp_path: Path, command: str, known: str
) -> None:
    fh = FaultHost(tmp_path, sshd=sshd)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("" if known == "unknown" else f"[127.0.0.1]:{sshd.port} {OTHER_KEY}\n")
    fh.hosts_file.write_text(fh.hosts_file.read_text().replace(str(sshd.known_hosts), str(known_hosts)))
    logins = sshd.accepted_logins()
    extra = ["--", "--model-path", "/models/tiny"] if command == "run" else []
    result = fh.cli(command, *extra, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    if known == "unknown":
        assert f"is not in {known_hosts}" in message
        assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {known_hosts}" in message
        assert "accept_new_host_keys: true" in message
    else:
        assert "CHANGED" in message and f"ssh-keygen -R '[127.0.0.1]:{sshd.port}' -f {known_hosts}" in message
    assert "nothing was sent" in message
    assert sshd.accepted_logins() == logins
    assert not (fh.workdir / "runs").exists() and not (fh.workdir / "lock").exists()
