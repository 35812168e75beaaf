"""known_hosts with OpenSSH's markers, patterns and hashed names, on a real loopback sshd (issue 33 broken 6), and the
advice for an unknown bastion key (issue 33, weak)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import HostKeyRejected
from orchestrator.transport import hostkeys, open_transport
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh

OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKxQ2F0i8yBkt1dXyF3cvT7qJw1jxvB9ZD7cW9u0z1c3"


@pytest.fixture
def system_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where /etc/ssh/ssh_known_hosts is read from in this test (empty until written)."""
    path = tmp_path / "ssh_known_hosts"
    monkeypatch.setattr(hostkeys, "SYSTEM_KNOWN_HOSTS", (str(path),))
    return path


def _host_key(sshd: SshdHost) -> str:
    return " ".join(sshd.host_key_line().split()[1:3])


def _name(sshd: SshdHost) -> str:
    return f"[127.0.0.1]:{sshd.port}"


def _connects(sshd: SshdHost, known: Path, **overrides: object) -> str:
    with open_transport(sshd.target(known_hosts=str(known), **overrides)) as t:
        return t.run("echo in").text


def test_markers_in_user_and_system_files_do_not_stop_a_known_host(
    sshd: SshdHost, tmp_path: Path, system_file: Path
) -> None:
    ca_line = f"@cert-authority *.example.com,{_name(sshd)} {OTHER_KEY} ca@example\n"
    system_file.write_text(ca_line + f"@revoked * {OTHER_KEY}\n@unknown-marker x {OTHER_KEY}\n")
    known = tmp_path / "known_hosts"
    known.write_text(f"# team hosts\n{ca_line}\n{_name(sshd)} {_host_key(sshd)}\n@revoked gone.example {OTHER_KEY}\n")
    assert _connects(sshd, known) == "in\n"


def test_a_revoked_key_is_refused_naming_the_line_even_if_listed_and_with_accept_new(
    sshd: SshdHost, tmp_path: Path, system_file: Path
) -> None:
    known = tmp_path / "known_hosts"
    listed = f"{_name(sshd)} {_host_key(sshd)}\n"
    logins = sshd.accepted_logins()
    for where, text in (
        (known, listed + f"@revoked * {_host_key(sshd)}\n"),
        (system_file, f"@revoked * {_host_key(sshd)}\n"),
    ):
        other = system_file if where is known else known
        where.write_text(text)
        other.write_text(listed if where is system_file else "")
        with pytest.raises(HostKeyRejected) as caught:
            _connects(sshd, known)
        message = str(caught.value)
        assert "REVOKED" in message and f"{where}:{2 if where is known else 1}" in message, message
        assert "nothing was sent" in message
    # accept-new never adds a revoked key
    known.write_text("")
    system_file.write_text(f"@revoked [127.0.0.1]:* {_host_key(sshd)}\n")
    with pytest.raises(HostKeyRejected, match="REVOKED"):
        _connects(sshd, known, accept_new_host_keys=True)
    assert known.read_text() == "" and sshd.accepted_logins() == logins


def test_a_host_known_only_through_its_ca_is_refused_naming_the_ca_line(sshd: SshdHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority [127.0.0.1]:* {OTHER_KEY}\n")
    with pytest.raises(HostKeyRejected) as caught:
        _connects(sshd, known)
    message = str(caught.value)
    assert f"{known}:1 trusts a certificate authority" in message and "ssh-keyscan" in message, message


def test_patterns_negations_and_hashed_names_match_as_openssh(sshd: SshdHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.?]:*,other.example {_host_key(sshd)}\n")
    assert _connects(sshd, known) == "in\n"
    known.write_text(f"[127.0.0.*]:*,!{_name(sshd)} {_host_key(sshd)}\n")
    with pytest.raises(HostKeyRejected, match="is not in"):
        _connects(sshd, known)
    known.write_text(f"{_name(sshd)} {_host_key(sshd)}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")  # OpenSSH's own hashing
    assert _connects(sshd, known) == "in\n"
    # ...and OpenSSH agrees with our reading of the same file.
    ssh = subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", str(sshd.client_key), "-p", str(sshd.port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
         f"{sshd.user}@127.0.0.1", "echo in"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert ssh.stdout == "in\n", ssh.stderr


def test_unknown_bastion_key_advice_does_not_ask_for_what_is_already_set(sshd: SshdHost, tmp_path: Path) -> None:
    empty = tmp_path / "bastion_known_hosts"
    empty.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        f"  UserKnownHostsFile {empty}\n"
    )
    target = sshd.target(proxy_jump="jump", ssh_config_path=str(config), accept_new_host_keys=True)
    with pytest.raises(HostKeyRejected) as caught, open_transport(target) as t:
        t.run("true")
    message = str(caught.value)
    assert "bastion on the way to ssh" in message and f"is not in {empty}" in message, message
    assert "set `accept_new_host_keys: true`" not in message
    assert f"`StrictHostKeyChecking accept-new` under the bastion's `Host jump` entry in {config}" in message
    assert empty.read_text() == ""
    # The GPU host itself, unknown and without accept-new, still gets that advice.
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyRejected, match="set `accept_new_host_keys: true`"):
        _connects(sshd, known)
