"""`orchestrator run` with `@cert-authority` and `@revoked` lines in known_hosts (issue 33 broken 6): a known host
runs, a host known only through its CA runs on its certificate, a revoked key is refused for that reason, and none
is a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.simhost import orchestrator, run_json, write_hosts
from tests.sshd_host import SshdHost, login_user

pytestmark = pytest.mark.ssh

CA_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKxQ2F0i8yBkt1dXyF3cvT7qJw1jxvB9ZD7cW9u0z1c3"
FLAGS = ["--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--fp8-gemm-backend", "cutlass"]


def _run(sshd: SshdHost, tmp_path: Path, known_hosts: str) -> subprocess.CompletedProcess[str]:
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts)
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", sshd=sshd, known_hosts=str(known))
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *FLAGS,
                          db=tmp_path / "o.db")  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_ca_and_revoked_lines_for_other_keys_leave_the_host_usable(sshd: SshdHost, tmp_path: Path) -> None:
    text = f"@cert-authority * {CA_KEY}\n@revoked * {CA_KEY}\n{sshd.host_key_line()}"
    assert run_json(_run(sshd, tmp_path, text))["status"] == "pass"


def test_a_revoked_host_key_is_refused_for_that_reason(sshd: SshdHost, tmp_path: Path) -> None:
    key = " ".join(sshd.host_key_line().split()[1:3])
    logins = sshd.accepted_logins()
    result = _run(sshd, tmp_path, f"{sshd.host_key_line()}@revoked * {key}\n")
    message = " ".join(result.stderr.split())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "REVOKED" in message and "known_hosts:2 marks it @revoked" in message, message
    assert sshd.accepted_logins() == logins
    assert not (tmp_path / "work" / "runs").exists()


def test_a_host_known_only_through_its_ca_runs(sshd: SshdHost, tmp_path: Path) -> None:
    host = SshdHost(login_user(), host_ca=True).start()
    try:
        assert run_json(_run(host, tmp_path, host.ca_line()))["status"] == "pass"
    finally:
        host.cleanup()
