"""One attempt pipeline (sweep/cell_run.launch_attempt) for sweeps, retries, `run` and `repro`.

`repro` used to carry its own copy, which had drifted: it numbered every run 1 and let a launch whose
reply was lost run on. Both behaviours are the pipeline's now, and checked here on the simulated host.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.errors import ConnectionLost
from orchestrator.host.launcher import Launch, LaunchSpec
from orchestrator.host.session import HostSession
from orchestrator.matrix.argv import cell_from_argv
from orchestrator.model import Status
from orchestrator.planning.cells import plan_cell
from orchestrator.store.records import SweepRecord, new_run_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import Slot, build_spec, launch_attempt
from orchestrator.sweep.execute import RunSettings
from tests import simhost
from tests.faults_support import reap


def test_a_launch_whose_reply_was_lost_is_stopped_and_each_attempt_is_numbered_by_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "work"
    host = load_hosts(simhost.write_hosts(tmp_path / "hosts.yaml", workdir))["simhost"]
    session = HostSession.open(host)
    started: list[Launch] = []
    real_start = session.launcher.start

    def start_and_lose_the_reply(spec: LaunchSpec, secrets: dict[str, str]) -> Launch:
        started.append(real_start(spec, secrets))
        raise ConnectionLost("the connection dropped before the launch's reply arrived")

    monkeypatch.setattr(session.launcher, "start", start_and_lose_the_reply)
    try:
        grammar = session.grammar(None)
        plan = plan_cell(cell_from_argv(["--model-path", "/m"], grammar), grammar, host.gpus)
        with Store(tmp_path / "o.db") as store:
            store.create_sweep(SweepRecord(sweep_id="s-1", name="m", host=host.name, matrix_yaml="", started_at=0.0))
            store.save_cells("s-1", [plan.cell])
            for _ in range(2):
                slot = Slot((0,), session.placement.free_ports(1, set())[0])
                spec, secrets = build_spec(session, plan, slot, new_run_id(), None)
                result = launch_attempt(store, session, "s-1", plan.cell, spec, secrets, RunSettings())
                assert result.verdict.status is Status.INFRA and "not launched" in result.verdict.reason
            runs = store.runs("s-1")
        assert [r.attempt for r in runs] == [1, 2]
        assert len(started) == 2
        deadline = time.monotonic() + 10
        while any(session.launcher.alive(launch) for launch in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(session.launcher.alive(launch) for launch in started), "a launch whose reply was lost ran on"
    finally:
        session.close()
        assert reap(workdir) == []
