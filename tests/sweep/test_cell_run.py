"""One attempt pipeline (sweep/cell_run.launch_attempt) for sweeps, retries, `run` and `repro`.

`repro` used to carry its own copy, which had drifted: it numbered every run 1 and let a launch whose
reply was lost run on. Both behaviours are the pipeline's now, and checked here on the simulated host.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts, load_matrix
from orchestrator.errors import ConnectionLost
from orchestrator.host.launcher import Launch, LaunchSpec
from orchestrator.host.session import HostSession
from orchestrator.matrix.argv import cell_from_argv
from orchestrator.matrix.expand import expand
from orchestrator.model import Status
from orchestrator.planning.cells import plan_cell
from orchestrator.store.records import RunRecord, SweepRecord, new_run_id
from orchestrator.store.sqlite import Store
from orchestrator.sweep import recover
from orchestrator.sweep.cell_run import Slot, build_spec, launch_attempt
from orchestrator.sweep.execute import RunSettings
from orchestrator.sweep.recover import settle_in_flight
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


def test_a_re_attached_launch_masks_and_authenticates_with_the_secrets_its_launch_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host secret, a matrix secret and a secret flag (the API key): each must be masked in a re-attached
    # launch's log as in its launch's, and the key must authenticate its probes.
    monkeypatch.setenv("ORCH_T_HOST", "host-secret-value-1")
    monkeypatch.setenv("ORCH_T_MATRIX", "matrix-secret-value-2")
    monkeypatch.setenv("ORCH_T_KEY", "api-key-value-3")
    workdir = tmp_path / "work"
    hosts = simhost.write_hosts(tmp_path / "hosts.yaml", workdir, env={"HF_TOKEN": {"secret": "ORCH_T_HOST"}})
    host = load_hosts(hosts)["simhost"]
    (tmp_path / "m.yaml").write_text(
        "name: m\nflags: {model-path: /m, api-key: {secret: ORCH_T_KEY}}\nmatrix: {attention-backend: [triton]}\n"
        "env: {WANDB_API_KEY: {secret: ORCH_T_MATRIX}}\n"
    )
    matrix = load_matrix(tmp_path / "m.yaml")
    session = HostSession.open(host)
    followed: list[Launch] = []
    monkeypatch.setattr(recover, "watch_attempt", lambda _s, _h, _c, _r, launch, *_a, **_k: followed.append(launch))
    try:
        grammar = session.grammar(None)
        plan = plan_cell(expand(matrix)[0], grammar, host.gpus)
        with Store(tmp_path / "o.db") as store:
            store.create_sweep(SweepRecord(sweep_id="s-1", name="m", host=host.name, matrix_yaml="", started_at=0.0))
            store.save_cells("s-1", [plan.cell])
            slot = Slot((0,), session.placement.free_ports(1, set())[0])
            spec, secrets = build_spec(session, plan, slot, new_run_id(), matrix)
            store.create_run(
                RunRecord(run_id=spec.run_id, sweep_id="s-1", cell_id=plan.cell.cell_id, attempt=1, host=host.name,
                          started_at=time.time())
            )  # fmt: skip
            launched = session.launcher.start(spec, secrets)
            store.mark_launched(spec.run_id, run_dir=spec.run_dir, pgid=launched.pgid, port=spec.port, gpus=spec.gpus)
            settle_in_flight(store, session, lambda: session, "s-1", RunSettings(), lambda _r, _a: None, matrix=matrix)
            assert len(followed) == 1
            again = followed[0]
            assert set(again.secret_values) == set(launched.secret_values) == set(secrets.values())
            assert len(secrets) == 3 and again.api_key == launched.api_key == "api-key-value-3"
            session.launcher.stop(launched, 5.0)
    finally:
        session.close()
        assert reap(workdir) == []
