"""`orchestrator run` to a host behind a bastion, named in an Included ssh config file (issue 16 acceptance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.transport.ssh_include import config_text, included_files
from orchestrator.transport.ssh_target import SshTarget, resolve
from tests.simhost import orchestrator, run_json, write_hosts
from tests.sshd_host import SshdHost

FLAGS = ["--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--fp8-gemm-backend", "cutlass"]


def _reach(sshd: SshdHost) -> str:
    return (
        f"  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )


def test_run_through_the_bastion_named_in_an_included_file(tmp_path: Path, sshd: SshdHost) -> None:
    cluster = tmp_path / "cluster.conf"
    cluster.write_text(f"Host gpu-box\n  ProxyJump jump\n{_reach(sshd)}")
    config = tmp_path / "ssh_config"
    config.write_text(f"Include {cluster}\nHost jump\n{_reach(sshd)}")
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", sshd=sshd, ssh="gpu-box", ssh_config=str(config))
    assert resolve(SshTarget("gpu-box", ssh_config_path=str(config))).proxy_jump == ("jump",)
    before = sshd.log.read_bytes().count(b"Accepted publickey")
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *FLAGS,
                          db=tmp_path / "o.db")  # fmt: skip
    data = run_json(result)
    assert data["status"] == "pass", data
    logins = sshd.log.read_bytes().count(b"Accepted publickey") - before
    # Every connection to gpu-box is one login on the bastion plus one through it: always an even count.
    assert logins >= 2 and logins % 2 == 0, logins


def test_include_globs_relative_to_dot_ssh_and_first_value_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    conf_d = tmp_path / ".ssh" / "conf.d"
    conf_d.mkdir(parents=True)
    (conf_d / "10-a.conf").write_text("Host box\n  Port 2201\n  User first\n")
    (conf_d / "20-b.conf").write_text("Host box\n  Port 2202\n  HostName b.example\n")
    config = tmp_path / ".ssh" / "config"
    config.write_text("Include conf.d/*.conf\nHost *\n  User later\n  ProxyJump none\n")
    assert included_files("conf.d/*.conf") == [str(conf_d / "10-a.conf"), str(conf_d / "20-b.conf")]
    assert "Port 2202" in config_text(str(config))
    r = resolve(SshTarget("box", ssh_config_path=str(config)))
    assert (r.hostname, r.port, r.user, r.proxy_jump) == ("b.example", 2201, "first", ())
