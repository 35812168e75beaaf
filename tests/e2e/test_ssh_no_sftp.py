"""`orchestrator run` on a host whose sshd has no SFTP subsystem, directly and through a ProxyJump bastion
(issue 33 broken 9): the cell runs end to end, SFTP's absence is said once, nothing reconnects, no lock is left."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns import BastionNets
from tests.simhost import orchestrator, run_json, write_hosts
from tests.sshd_host import SshdHost
from tests.transport.test_ssh_bastion_netns import _reach, bastion_and_target  # noqa: F401 (the fixture)

pytestmark = pytest.mark.ssh

FLAGS = ["--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--fp8-gemm-backend", "cutlass"]


@pytest.fixture
def no_sftp(own_sshd: SshdHost) -> SshdHost:
    """The loopback sshd of this test alone (tests/e2e/conftest.py), restarted without `Subsystem sftp`."""
    own_sshd.sftp = False
    return own_sshd.restart()


def _check_ran_without_sftp(result: subprocess.CompletedProcess[str], work: Path) -> None:
    data = run_json(result)
    assert data["status"] == "pass", data
    assert result.stderr.count("no SFTP subsystem") == 1, result.stderr
    assert "reconnecting" not in result.stderr and "Channel closed" not in result.stderr, result.stderr
    assert not (work / "lock").exists()
    runs = list((work / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "server.log").stat().st_size > 0


def test_run_on_a_host_without_sftp(no_sftp: SshdHost, tmp_path: Path) -> None:
    work = tmp_path / "work"
    hosts = write_hosts(tmp_path / "hosts.yaml", work, sshd=no_sftp)
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *FLAGS,
                          db=tmp_path / "o.db")  # fmt: skip
    _check_ran_without_sftp(result, work)
    assert no_sftp.accepted_logins() >= 1
    assert "subsystem request for sftp" in no_sftp.log.read_text()  # it was asked, and refused


@pytest.fixture
def bastion_and_bare_target(
    bastion_and_target: tuple[BastionNets, SshdHost, SshdHost],  # noqa: F811 (the fixture imported above)
) -> tuple[BastionNets, SshdHost, SshdHost]:
    """The bastion test's namespaces and sshd (ended and removed by that fixture), the target's sshd restarted
    without `Subsystem sftp`."""
    nets, bastion, target = bastion_and_target
    target.sftp = False
    target.restart()
    return nets, bastion, target


def test_run_through_a_bastion_to_a_host_without_sftp(
    bastion_and_bare_target: tuple[BastionNets, SshdHost, SshdHost], tmp_path: Path
) -> None:
    nets, bastion, target = bastion_and_bare_target
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu-box\n{_reach(target)}  ProxyJump jump\nHost jump\n{_reach(bastion)}")
    work = tmp_path / "work"
    hosts = write_hosts(
        tmp_path / "hosts.yaml", work, transport="ssh", ssh="gpu-box", ssh_config=str(config),
        launcher=f"{sys.executable} -m orchestrator.sim",
    )  # fmt: skip
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *FLAGS,
                          db=tmp_path / "o.db", timeout=180)  # fmt: skip
    _check_ran_without_sftp(result, work)
    inner = nets.target_ip.rsplit(".", 1)[0] + ".1"
    sources = re.findall(r"Accepted publickey for \S+ from (\S+)", target.log.read_text())
    assert sources and set(sources) == {inner}, sources
    assert "subsystem request for sftp" in target.log.read_text()
