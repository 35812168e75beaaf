"""Packing: cells narrower than the host run side by side, on disjoint GPU sets, with ports far apart.

Each test runs a real sweep on a simulated 8-GPU host (local transport) and checks two records of it: the
run rows (GPUs, ports, start and end), and what the host's fake nvidia-smi state showed while it ran, sampled
by a thread (which server process held which GPU). No speed is asserted; the one timing is a simulated load
long enough that the four launches of a round surely hold their GPUs at the same time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig, effective_deadlines
from orchestrator.host.ports import PORT_SPACING
from orchestrator.model import Status
from orchestrator.sim import gpu_state
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.preflight import Preflight
from orchestrator.sweep.scheduler import VERIFIED_FRESH_S
from tests.simhost import random_port_base

TIMING = {"import_s": 0.02, "init_s": 0.02, "load_weights_s": 0.3, "memory_alloc_s": 0.02,
          "capture_cuda_graph_s": 0.02, "warmup_s": 0.02, "prefill_s": 0.002, "decode_token_s": 0.001}  # fmt: skip
DEADLINES = {"model_load": 20.0, "memory_alloc": 10.0, "cuda_graph_capture": 10.0, "ready": 40.0, "probe": 15.0,
             "stop_grace": 3.0, "gpu_release": 10.0}  # fmt: skip


@dataclass
class GpuWatch:
    """Samples the simulated GPUs' holders (what nvidia-smi reports) every few ms while a sweep runs."""

    state: Path
    samples: list[dict[int, set[int]]] = field(default_factory=list)
    """GPU index -> process groups (launches) of the processes holding it, one dict per sample."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Sample until stopped."""
        while not self._stop.is_set():
            sample: dict[int, set[int]] = {}
            for holding in gpu_state.holdings(self.state):
                group = _pgid(holding.pid)
                if group is not None:
                    sample.setdefault(holding.gpu, set()).add(group)
            self.samples.append(sample)
            time.sleep(0.005)

    def stop(self) -> None:
        """End the sampling."""
        self._stop.set()

    def groups_at_once(self) -> int:
        """The most launches seen holding GPUs in one sample."""
        return max((len(set().union(*s.values())) for s in self.samples if s), default=0)

    def gpus_of(self, group: int) -> set[int]:
        """Every GPU a launch was ever seen holding."""
        return {gpu for s in self.samples for gpu, groups in s.items() if group in groups}


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@dataclass
class Swept:
    """A finished sweep: its runs and what the GPU watch saw."""

    runs: list[RunRecord]
    watch: GpuWatch

    def overlapping(self) -> list[tuple[RunRecord, RunRecord]]:
        """Every two runs in flight at the same time (by their rows: from before launch to after the GPU check)."""
        return [
            (a, b)
            for i, a in enumerate(self.runs)
            for b in self.runs[i + 1 :]
            if a.started_at < (b.ended_at or 0) and b.started_at < (a.ended_at or 0)
        ]

    def most_in_flight(self) -> int:
        """The most runs whose rows overlap at one instant."""
        edges = sorted([(r.started_at, 1) for r in self.runs] + [(r.ended_at or 0, -1) for r in self.runs])
        most = now = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        return most


def _sweep(
    tmp_path: Path,
    tp_sizes: list[int],
    *,
    packed: bool,
    hooks: SweepHooks | None = None,
    port_base: int | None = None,
    load_s: float = 0.3,
) -> Swept:
    scenario = tmp_path / "scenario.yaml"
    timing = {**TIMING, "load_weights_s": load_s}
    scenario.write_text(yaml.safe_dump({"version": "0.5.9", "gpus": 8, "timing": timing}))
    matrix_file = tmp_path / "matrix.yaml"
    include = [{"served-model-name": f"cell{i}", "tp-size": tp} for i, tp in enumerate(tp_sizes)]
    doc: dict[str, Any] = {"name": "packing", "host": "packhost", "flags": {"model-path": "/models/m"},
                           "matrix": {"include": include}, "probes": {"settle_s": 0}}  # fmt: skip
    matrix_file.write_text(yaml.safe_dump(doc))
    matrix = load_matrix(matrix_file)
    workdir = tmp_path / "work"
    host = HostConfig(
        name="packhost", transport="sim", workdir=str(workdir), gpus=8, deadlines=DEADLINES,
        python=sys.executable, scenario=str(scenario), port_base=port_base or random_port_base(),
    )  # fmt: skip
    options = SweepOptions(packed=packed, settings=RunSettings(effective_deadlines(host, matrix), matrix.probes))
    watch = GpuWatch(workdir / "gpu-state")
    watch.state.mkdir(parents=True)
    sampler = threading.Thread(target=watch.run, daemon=True)
    sampler.start()
    try:
        with Store(tmp_path / "store.db") as store:
            sweep_id = run_sweep(store, matrix, [host], options, hooks or SweepHooks()).sweep_id
            runs = store.runs(sweep_id)
    finally:
        watch.stop()
        sampler.join()
    return Swept(runs, watch)


def _check_disjoint_and_spaced(swept: Swept) -> None:
    for a, b in swept.overlapping():
        assert not set(a.gpus) & set(b.gpus), f"runs in flight together share GPUs: {a.gpus} {b.gpus}"
        assert abs((a.port or 0) - (b.port or 0)) >= PORT_SPACING, f"ports too close: {a.port} {b.port}"
    for sample in swept.watch.samples:
        assert all(len(groups) == 1 for groups in sample.values()), f"two launches on one GPU: {sample}"
    for run in swept.runs:
        assert run.pgid is not None
        assert swept.watch.gpus_of(run.pgid) <= set(run.gpus), "a launch held GPUs outside its CUDA_VISIBLE_DEVICES"


def _bind_a_port_base(sock: socket.socket) -> int:
    """Bind `sock` to a random test port base; another one when something else on this machine has it."""
    for _ in range(20):
        base = random_port_base()
        try:
            sock.bind(("127.0.0.1", base))
        except OSError:
            continue
        return base
    raise AssertionError("20 random port bases were all taken on this machine")


def test_eight_tp2_cells_on_eight_gpus_run_four_at_a_time_on_disjoint_gpus(tmp_path: Path) -> None:
    # Another program listens on the host's first port: no launch may get it.
    with socket.socket() as busy:
        base = _bind_a_port_base(busy)
        busy.listen()
        swept = _sweep(tmp_path, [2] * 8, packed=True, port_base=base, load_s=1.5)
    assert [r.verdict.status if r.verdict else None for r in swept.runs] == [Status.PASS] * 8
    assert swept.most_in_flight() == 4
    assert swept.watch.groups_at_once() == 4
    assert all(len(a.gpus) + len(b.gpus) <= 8 for a, b in swept.overlapping())
    assert base not in {r.port for r in swept.runs}
    _check_disjoint_and_spaced(swept)


def test_a_cell_wider_than_the_free_gpus_waits_for_them(tmp_path: Path) -> None:
    swept = _sweep(tmp_path, [4, 4, 8], packed=True)
    assert [r.verdict.status if r.verdict else None for r in swept.runs] == [Status.PASS] * 3
    four = [r for r in swept.runs if len(r.gpus) == 4]
    whole = next(r for r in swept.runs if len(r.gpus) == 8)
    assert {four[0].gpus, four[1].gpus} == {(0, 1, 2, 3), (4, 5, 6, 7)}
    assert (four[0], four[1]) in swept.overlapping(), "the two 4-GPU cells did not run together"
    assert not [pair for pair in swept.overlapping() if whole in pair], "the 8-GPU cell ran beside another"
    _check_disjoint_and_spaced(swept)


def test_serial_runs_one_launch_at_a_time(tmp_path: Path) -> None:
    swept = _sweep(tmp_path, [2, 2], packed=False)
    assert [r.verdict.status if r.verdict else None for r in swept.runs] == [Status.PASS] * 2
    assert swept.most_in_flight() == 1 and swept.overlapping() == []
    assert swept.watch.groups_at_once() == 1


def test_gpus_nvidia_smi_shows_busy_are_never_launched_on(tmp_path: Path) -> None:
    state = tmp_path / "work" / "gpu-state"
    with _foreign_holder(state, "2,5") as holder:

        def after_preflight(_plan: Preflight) -> None:
            # Preflight saw every GPU free; the holder comes now, after the freshness of that look.
            holder.start()
            time.sleep(VERIFIED_FRESH_S)

        swept = _sweep(tmp_path, [2] * 4, packed=True, hooks=SweepHooks(on_plan=after_preflight))
        assert holder.alive(), "the foreign holder was killed"
    assert [r.verdict.status if r.verdict else None for r in swept.runs] == [Status.PASS] * 4
    used = {g for r in swept.runs for g in r.gpus}
    assert not used & {2, 5} and used <= {0, 1, 3, 4, 6, 7}
    assert not any({2, 5} & swept.watch.gpus_of(r.pgid or -1) for r in swept.runs)
    assert swept.most_in_flight() <= 3  # the six GPUs left make three pairs
    _check_disjoint_and_spaced(swept)


@dataclass
class _Holder:
    state: Path
    gpus: str
    proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {**os.environ, gpu_state.STATE_ENV: str(self.state)}
        argv = [sys.executable, "-m", "orchestrator.sim.hold_gpu", "--gpus", self.gpus, "--seconds", "120"]
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout is not None and "holding" in self.proc.stdout.readline()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextmanager
def _foreign_holder(state: Path, gpus: str) -> Iterator[_Holder]:
    holder = _Holder(state, gpus)
    try:
        yield holder
    finally:
        if holder.proc is not None and holder.proc.poll() is None:
            os.killpg(holder.proc.pid, signal.SIGTERM)  # its own session, started by this test
            holder.proc.wait(10)
