"""The cost before launch: `sweep` prints cells and wall time, and above --max-hours asks; without a terminal it
stops with a clear message, launching and storing nothing, unless --yes."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.config.model import HostConfig
from orchestrator.model import Category, Cell, Status, Verdict
from orchestrator.planning.estimate import (
    SIM_OVERHEAD_S,
    launch_estimate,
    load_worst_case_s,
    past_durations,
    worst_case_s,
)
from orchestrator.settings import Deadlines, LoadSettings
from orchestrator.sim.scenario import load_scenario
from orchestrator.store import RunRecord, Store
from orchestrator.store.records import PastRun
from orchestrator.sweep.costing import host_estimate
from tests.paths import REPO
from tests.simhost import orchestrator, processes_under, write_hosts

DATA = REPO / "tests" / "data" / "adaptive"


def test_over_the_limit_without_a_terminal_stops_before_anything(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=DATA / "scenario.yaml")
    db = tmp_path / "o.db"
    args = ("sweep", str(DATA / "matrix.yaml"), "--host", "simhost", "--hosts", str(hosts))
    result = orchestrator(*args, "--max-hours", "0.0001", db=db, timeout=300)
    assert result.returncode != 0
    assert "plan: 648 cells; strategy adaptive (the default for this size): launches at most 64 cells" in result.stdout
    assert "not started" in result.stderr and "above --max-hours 0.0001" in result.stderr
    assert "no terminal to ask" in result.stderr and "--yes" in result.stderr
    with Store(db) as store:
        assert store.list_sweeps() == []
    assert not list((tmp_path / "work").glob("runs/*"))
    assert processes_under(tmp_path / "work") == []


def test_yes_starts_it_anyway(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=DATA / "known-bad-scenario.yaml")
    db = tmp_path / "o.db"
    args = ("sweep", str(DATA / "known-bad-matrix.yaml"), "--host", "simhost", "--hosts", str(hosts))
    result = orchestrator(*args, "--max-hours", "0", "--yes", db=db, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "plan: 12 cells; strategy full (the default for this size): launches 12 cells" in result.stdout
    with Store(db) as store:
        assert len(store.list_sweeps()) == 1


def _past(seconds: float, model: str, status: Status = Status.PASS, launched: bool = True) -> PastRun:
    cell = Cell("c1", {"model-path": model})
    run = RunRecord(
        run_id="r-1", sweep_id="s-1", cell_id="c1", attempt=1, state="done", host="h", started_at=100.0,
        ended_at=100.0 + seconds, run_dir="/w/r-1" if launched else None,
        verdict=Verdict(status, None, Category.HEALTHY),
    )  # fmt: skip
    return PastRun(cell, run, {"sglang": "0.5.9"}, {})


def test_estimate_prefers_past_runs_of_the_same_model_and_packs() -> None:
    sample = [Cell("a", {"model-path": "/m", "tp-size": 2})]
    history = [_past(600, "/m"), _past(620, "/m"), _past(5, "/other"), _past(1, "/m", launched=False)]
    assert past_durations(history, "/m") == [600, 620]
    # Past runs already took their speed loads: the load adds nothing to their median.
    packed = launch_estimate(40, 8, Deadlines(), history, sample, packed=True, load=LoadSettings())
    assert packed.source == "past runs (2)" and packed.per_cell_s == 610 and packed.parallel == 4
    assert abs(packed.hours - 40 * 610 / 4 / 3600) < 1e-9
    serial = launch_estimate(40, 8, Deadlines(), [], sample, packed=False, load=None)
    assert serial.source == "deadlines" and serial.per_cell_s == worst_case_s(Deadlines()) and serial.parallel == 1


def test_without_past_runs_the_speed_load_is_in_the_worst_case() -> None:
    sample = [Cell("a", {"model-path": "/m"})]
    deadlines = Deadlines(probe=100.0)
    # 32 requests 8 at a time are 4 waves, each held to the probe deadline, 3 times over.
    assert load_worst_case_s(LoadSettings(requests=32, concurrency=8, repeat=3), deadlines) == 3 * 4 * 100.0
    assert load_worst_case_s(LoadSettings(requests=33, concurrency=8, repeat=1), deadlines) == 5 * 100.0
    assert load_worst_case_s(None, deadlines) == 0.0
    loaded = launch_estimate(10, 8, deadlines, [], sample, packed=False, load=LoadSettings())
    assert loaded.per_cell_s == worst_case_s(deadlines) + 1200.0


def test_a_simulated_host_costs_its_scenarios_timing_and_serving_speed(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    timing = "timing: {import_s: 1, init_s: 1, load_weights_s: 10, memory_alloc_s: 2, capture_cuda_graph_s: 3, "
    scenario.write_text(f"version: 0.5.9\n{timing}warmup_s: 1, decode_token_s: 0.01}}\n")
    fast = tmp_path / "fast.yaml"
    fast.write_text(f"version: 0.5.9\n{timing}warmup_s: 1, decode_token_s: 0.01}}\nperf: {{tok_s: 1000}}\n")
    sample = [Cell("a", {"model-path": "/m"})]
    load = LoadSettings(requests=8, concurrency=4, output_len=100, repeat=2)
    startup = 18 + SIM_OVERHEAD_S
    alone = launch_estimate(5, 8, Deadlines(), [], sample, False, None, load_scenario(scenario)[0])
    assert alone.source == "the simulated host's timing" and alone.per_cell_s == startup
    # Without perf: each request decodes its 100 tokens at 0.01 s, 4 at once: 1,600 tokens take 4 s.
    each = launch_estimate(5, 8, Deadlines(), [], sample, False, load, load_scenario(scenario)[0])
    assert abs(each.per_cell_s - (startup + 4.0)) < 1e-9
    # With perf: the server's 1000 tok/s are shared: 1,600 tokens take 1.6 s.
    shared = launch_estimate(5, 8, Deadlines(), [], sample, False, load, load_scenario(fast)[0])
    assert abs(shared.per_cell_s - (startup + 1.6)) < 1e-9
    # The hosts.yaml side: a simulated host's file is read; one that does not load falls back to the deadlines.
    host = HostConfig(name="h", transport="sim", gpus=8, scenario=str(fast))
    assert host_estimate(5, host, Deadlines(), [], sample, False, load).per_cell_s == shared.per_cell_s
    broken = HostConfig(name="h", transport="sim", gpus=8, scenario=str(tmp_path / "missing.yaml"))
    assert host_estimate(5, broken, Deadlines(), [], sample, False, load).source == "deadlines"


def _on_a_terminal(args: list[str], db: Path, answer: bytes) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as its stdin and stdout, answer its question, return (exit, output)."""
    master, slave = os.openpty()
    env = {**os.environ, "ORCHESTRATOR_DB": str(db), "COLUMNS": "200", "TERM": "xterm"}
    child = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO
    )
    os.close(slave)
    seen, answered, deadline = b"", False, time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"Start it anyway?" in seen:
                os.write(master, answer)
                answered = True
            if child.poll() is not None and not ready:
                break
        return child.wait(timeout=60), seen.decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(master)


def test_on_a_terminal_it_asks_and_a_no_launches_nothing(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=DATA / "known-bad-scenario.yaml")
    db = tmp_path / "o.db"
    args = ["sweep", str(DATA / "known-bad-matrix.yaml"), "--host", "simhost", "--hosts", str(hosts)]
    args += ["--max-hours", "0"]
    code, out = _on_a_terminal(args, db, b"n\n")
    assert code != 0 and "Start it anyway?" in out and "declined at the prompt" in out, out[-2000:]
    with Store(db) as store:
        assert store.list_sweeps() == []
    code, out = _on_a_terminal(args, db, b"y\n")
    assert code == 0, out[-3000:]
    with Store(db) as store:
        assert len(store.list_sweeps()) == 1
    assert processes_under(tmp_path / "work") == []
