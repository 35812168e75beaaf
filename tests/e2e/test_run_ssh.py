"""`orchestrator run` over real SSH to the loopback sshd, on the simulated host (issue 2 item 3, issue 3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.host.launcher import LaunchSpec
from orchestrator.host.session import HostSession
from tests.simhost import (
    INCIDENT_SCENARIO,
    orchestrator,
    processes_under,
    run_json,
    sim_gpu_holders,
    write_hosts,
)
from tests.sshd_host import SshdHost

INCIDENT = [
    "--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--attention-backend", "flashinfer",
    "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "deep_gemm",
]  # fmt: skip


@pytest.fixture()
def ssh_hosts(tmp_path: Path, sshd: SshdHost) -> Path:
    """A hosts file whose `simhost` is the simulated host reached through the loopback sshd."""
    return write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", sshd=sshd)


def _assert_host_clean(workdir: Path) -> None:
    assert processes_under(workdir) == []
    assert sim_gpu_holders(workdir) == []


def test_sim_launched_over_ssh_answers_health_generate_through_it(tmp_path: Path, ssh_hosts: Path) -> None:
    host = load_hosts(ssh_hosts)["simhost"]
    session = HostSession.open(host)
    try:
        assert session.transport.describe().startswith("ssh")
        spec = LaunchSpec(
            run_id="r-sshcheck",
            argv=(*session.launcher_words(), "--model-path", "/m", "--tp-size", "8", "--port", "31234"),
            env={**session.base_env, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
            secret_names=(),
            gpus=tuple(range(8)),
            port=31234,
            run_dir=session.run_dir("r-sshcheck"),
        )
        launch = session.launcher.start(spec, {})
        client = session.probe_client(spec.port)
        try:
            deadline = time.monotonic() + 20
            status = None
            while time.monotonic() < deadline and status != 200:
                status = client.health_generate(timeout=1.0)
                time.sleep(0.1)
            assert status == 200
            reply = client.generate("The capital city of France is", {"temperature": 0, "max_new_tokens": 8})
            assert "Paris" in reply.text
        finally:
            client.close()
            session.launcher.stop(launch, 3.0)
        assert not session.launcher.alive(launch)
    finally:
        session.close()
    _assert_host_clean(tmp_path / "work")


def test_incident_launch_fails_at_sampled_decode_with_greedy_passing(tmp_path: Path, ssh_hosts: Path) -> None:
    result = orchestrator("run", "--host", "simhost", "--hosts", str(ssh_hosts), "--json", "--", *INCIDENT,
                          db=tmp_path / "o.db")  # fmt: skip
    data = run_json(result)
    assert (data["status"], data["phase"], data["category"]) == ("fail", "sampled_decode", "nan_in_probs")
    probes = {p["name"]: p for p in data["probes"]}
    assert probes["greedy"]["ok"] and "Paris" in probes["greedy"]["text_excerpt"]
    assert not probes["sampled"]["ok"]
    assert "probability tensor contains either" in data["root_cause_line"]
    assert any("DeepGemm is enabled but the scale_fmt" in w["text"] for w in data["warnings"])
    log = Path(data["log"]).read_text()
    assert data["root_cause_line"] in log.splitlines()
    _assert_host_clean(tmp_path / "work")


def test_hang_at_model_load_is_cut_at_its_deadline(tmp_path: Path, sshd: SshdHost) -> None:
    scenario = tmp_path / "hang.yaml"
    scenario.write_text(
        INCIDENT_SCENARIO.read_text().split("rules:")[0]
        + "rules:\n  - when: {attention-backend: triton}\n    fail: {at: model_load, kind: hang}\n"
    )
    deadlines = {"model_load": "2s", "ready": "15s", "probe": "5s", "stop_grace": "1s", "gpu_release": "5s"}
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=scenario, sshd=sshd, deadlines=deadlines)
    started = time.monotonic()
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--",
                          "--model-path", "/m", "--tp-size", "8", "--attention-backend", "triton",
                          db=tmp_path / "o.db")  # fmt: skip
    took = time.monotonic() - started
    data = run_json(result)
    assert (data["status"], data["phase"], data["category"]) == ("fail", "model_load", "hang_or_timeout")
    assert took < 15, f"the hang was cut at {took:.1f}s, not near its 2 s model_load deadline"
    _assert_host_clean(tmp_path / "work")


def test_invalid_flag_value_is_rejected_before_launch(tmp_path: Path, ssh_hosts: Path) -> None:
    started = time.monotonic()
    result = orchestrator("run", "--host", "simhost", "--hosts", str(ssh_hosts), "--json", "--",
                          "--model-path", "/m", "--attention-backend", "not_a_backend",
                          db=tmp_path / "o.db")  # fmt: skip
    took = time.monotonic() - started
    data = run_json(result)
    assert (data["status"], data["category"]) == ("invalid", "invalid_argument")
    assert "invalid choice: 'not_a_backend'" in data["reason"]
    assert data["run_dir"] is None, "an invalid cell must never be launched"
    assert not (tmp_path / "work" / "runs").exists() or not any((tmp_path / "work" / "runs").iterdir())
    # The whole command, interpreter start and SSH connection included, well inside any deadline.
    assert took < 6, f"took {took:.1f}s"


def test_secret_reaches_no_file_output_or_store(tmp_path: Path, sshd: SshdHost) -> None:
    secret = "hf_SeCrEt_9f8e7d6c5b4a"
    hosts = write_hosts(
        tmp_path / "hosts.yaml", tmp_path / "work", sshd=sshd, env={"HF_TOKEN": {"secret": "ORCH_TEST_HF_TOKEN"}}
    )
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *INCIDENT,
                          db=tmp_path / "o.db", env={"ORCH_TEST_HF_TOKEN": secret})  # fmt: skip
    data = run_json(result)
    assert data["status"] == "fail"
    assert secret not in result.stdout + result.stderr
    run_dir = Path(data["run_dir"])
    assert "HF_TOKEN" in (run_dir / "cmd.sh").read_text()
    for path in [*run_dir.rglob("*"), *tmp_path.glob("o.db*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    table = orchestrator("table", "--format", "json", db=tmp_path / "o.db")
    assert table.returncode == 0 and secret not in table.stdout
