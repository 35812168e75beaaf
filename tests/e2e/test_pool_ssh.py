"""A pool sweep over two real loopback sshd, the simulated host behind each; one host is killed mid-sweep.

The dead host's cell in flight is `infra` within seconds, said once; the cells still queued run on the
other host, which finishes the sweep; every run names its host. A second test runs a pool named by a
hosts.yaml group through the CLI, and reads the host of each cell from `table --format json`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config.hosts import load_hosts
from orchestrator.config.load import load_matrix
from orchestrator.config.model import effective_deadlines
from orchestrator.model import Status
from orchestrator.store.sqlite import Store
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from tests.e2e.pool_support import pool_files, run_pool_sweep, verdict_of
from tests.fault_harness import cli_env
from tests.paths import REPO
from tests.sshd_host import SshdHost, login_user


@pytest.fixture
def two_sshd(sshd: SshdHost) -> Iterator[tuple[SshdHost, SshdHost]]:
    """Two sshd of this test alone (it kills one)."""
    hosts = (SshdHost(login_user()).start(), SshdHost(login_user()).start())
    yield hosts
    for host in hosts:
        host.cleanup()


@pytest.mark.ssh
def test_a_pool_sweep_carries_on_when_one_host_dies(two_sshd: tuple[SshdHost, SshdHost], tmp_path: Path) -> None:
    hosts_file, members = pool_files(tmp_path, two_sshd, gpus=1)
    hosts = load_hosts(hosts_file)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    options = SweepOptions(settings=RunSettings(effective_deadlines(hosts["a"], matrix), matrix.probes))
    said: list[str] = []
    killed: list[float] = []

    def kill_b_once_serving() -> None:
        runs = members[1].workdir / "runs"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            logs = list(runs.glob("r-*/server.log")) if runs.is_dir() else []
            if any("fired up" in log.read_text(errors="replace") for log in logs):
                two_sshd[1].stop()  # the listener and every connection: the host is gone
                # Taken once it is gone: under load the stop takes a while, and b may still launch meanwhile.
                killed.append(time.monotonic())
            time.sleep(0.02)

    killer = threading.Thread(target=kill_b_once_serving)
    killer.start()
    try:
        with Store(tmp_path / "orchestrator.db") as store:
            started = time.monotonic()
            sweep_id = run_sweep(
                store, matrix, [hosts["a"], hosts["b"]], options,
                SweepHooks(on_host=lambda _host, line: said.append(line)),
            ).sweep_id  # fmt: skip
            ended = time.monotonic()
            results = store.cell_results(sweep_id)
            runs = store.runs(sweep_id)
            record = store.get_sweep(sweep_id)
    finally:
        killed.append(0.0)  # stops the killer if the sweep ended first
        killer.join()
        for fh in members:
            fh.reap()
    assert killed[0] > 0, "host b was killed mid-sweep"
    assert record.status == "done" and record.host == "a,b"
    assert len(results) == 8 and all(r.status is not None for r in results), "every cell has its verdict"
    assert {r.host for r in runs} <= {"a", "b"} and all(r.state == "done" for r in runs)
    by_host = Counter(r.host for r in runs)
    assert by_host["b"] >= 1 and by_host["a"] >= 4, by_host
    infra = [r for r in results if r.status is Status.INFRA]
    assert len(infra) <= 1 and all(r.host == "b" for r in infra), [(r.cell.label, r.host, r.reason) for r in infra]
    for result in results:  # every other cell has the scenario's verdict, wherever it ran
        if result.status is not Status.INFRA:
            assert result.status is not None and result.category is not None
            assert (result.status.value, result.category.value) == verdict_of(result.cell.label), result
    after_kill = [r for r in runs if r.started_at > time.time() - (time.monotonic() - killed[0])]
    assert after_kill and all(r.host == "a" for r in after_kill), "after the kill only host a launches"
    assert len([line for line in said if "host b is down" in line]) == 1, said
    # The dead host cost one operation's bounded attempts, not 20 s per operation per cell.
    assert ended - started < 120


def test_a_group_of_hosts_yaml_is_a_pool_through_the_cli(tmp_path: Path) -> None:
    hosts_file, members = pool_files(tmp_path, gpus=2)
    try:
        result = run_pool_sweep(tmp_path, hosts_file, tmp_path / "orchestrator.db")
    finally:
        for fh in members:
            fh.reap()
    assert result.returncode == 0, result.stdout + result.stderr
    cells = json.loads((tmp_path / "out.json").read_text())["cells"]
    assert len(cells) == 8
    assert {c["host"] for c in cells} == {"a", "b"}, [c["host"] for c in cells]
    for c in cells:
        assert (c["status"], c["category"]) == verdict_of(c["label"]), c
    assert "on a,b" in result.stdout, result.stdout
    header = next(line for line in result.stdout.splitlines() if line.split()[:1] == ["host"])
    assert "status" in header.split(), result.stdout  # the host is a column of the table


def test_a_killed_pool_sweep_resumes_each_run_on_its_own_host(tmp_path: Path) -> None:
    hosts_file, members = pool_files(tmp_path, gpus=1, decode_s=0.03)
    db = tmp_path / "orchestrator.db"
    base = [sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / "matrix.yaml"), "--hosts", str(hosts_file),
            "--db", str(db)]  # fmt: skip
    try:
        first = subprocess.Popen(
            [*base, "--host", "a", "--host", "b"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=cli_env(), start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until both hosts serve a launch of the sweep
            serving = [
                any("fired up" in log.read_text(errors="replace") for log in fh.workdir.glob("runs/r-*/server.log"))
                for fh in members
            ]
            if all(serving):
                break
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)  # the orchestrator alone: its launches live on, as after a crash
        first.wait(10)
        assert all(serving), "both hosts were running a cell when the sweep was killed"
        with Store(db) as store:
            sweep = store.latest_sweep()
            assert sweep is not None
            in_flight = {r.run_id: r.host for r in store.unfinished_runs(sweep.sweep_id)}
        assert set(in_flight.values()) == {"a", "b"}, in_flight
        resumed = subprocess.run([*base, "--resume", sweep.sweep_id], cwd=REPO, capture_output=True, text=True,
                                 timeout=300, env=cli_env())  # fmt: skip
    finally:
        for fh in members:
            fh.reap()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with Store(db) as store:
        results = store.cell_results(sweep.sweep_id)
        runs = {r.run_id: r for r in store.runs(sweep.sweep_id)}
        assert store.get_sweep(sweep.sweep_id).status == "done"
    assert len(results) == 8 and all(r.status is not None for r in results)
    for result in results:
        assert result.status is not None and result.category is not None
        assert (result.status.value, result.category.value) == verdict_of(result.cell.label), result
    for run_id, host in in_flight.items():  # each in-flight run was settled on the host it was on
        assert runs[run_id].host == host and runs[run_id].state in ("done", "abandoned"), runs[run_id]
    assert {r.host for r in runs.values()} == {"a", "b"}
    assert sum(r.state == "done" for r in runs.values()) == 8, "no cell ran twice"


def test_hosts_with_different_sglang_versions_make_the_host_an_axis(tmp_path: Path) -> None:
    hosts_file, members = pool_files(tmp_path, gpus=4)
    members[1].scenario.write_text(members[1].scenario.read_text().replace("version: 0.5.9", "version: 0.5.23"))
    out = tmp_path / "out.json"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / "matrix.yaml"), "--host", "a", "--host",
             "b", "--hosts", str(hosts_file), "--db", str(tmp_path / "o.db"), "--json-out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=300, env=cli_env(),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        on_b = next(c for c in json.loads(out.read_text())["cells"] if c["host"] == "b" and c["status"] == "fail")
        repro = subprocess.run(
            [sys.executable, "-m", "orchestrator", "repro", on_b["run_id"], "--hosts", str(hosts_file), "--json",
             "--db", str(tmp_path / "o.db")],
            cwd=REPO, capture_output=True, text=True, timeout=300, env=cli_env(),
        )  # fmt: skip
    finally:
        for fh in members:
            fh.reap()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hosts differ, so the host is an axis: a (sglang 0.5.9" in result.stdout
    cells = json.loads(out.read_text())["cells"]
    assert len(cells) == 16 and len({c["cell_id"] for c in cells}) == 16  # every cell on each lane
    for c in cells:
        lane = c["label"].split(", ")[0]
        assert lane in ("host=a", "host=b") and c["host"] == lane.removeprefix("host="), c
        assert (c["status"], c["category"]) == verdict_of(c["label"].split(", ", 1)[1]), c
    replay = json.loads(repro.stdout)
    assert replay["outcome"] == "the failure reproduced", repro.stdout + repro.stderr  # re-run on b, where it ran
    with Store(tmp_path / "o.db") as store:
        assert store.get_run(replay["repro"]["run_id"]).host == "b"
