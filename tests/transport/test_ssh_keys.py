"""A host that refuses our keys: the error names the host and every key offered (path, fingerprint, agent key),
never key material (issue 16 item 3). Against the real loopback sshd, with a key it does not know."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ConnectFailed
from orchestrator.transport import SshTarget, open_transport
from orchestrator.transport.ssh_keys import fingerprint
from tests.sshd_host import SshdHost, ssh_agent_holding

pytestmark = pytest.mark.ssh


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stranger", "-f", str(path)], check=True)
    return path


def _ssh_keygen_fingerprint(path: Path) -> str:
    return subprocess.run(["ssh-keygen", "-l", "-f", str(path)], capture_output=True, text=True).stdout.split()[1]


def _no_material(message: str, *keys: Path) -> None:
    assert "PRIVATE KEY" not in message
    for key in keys:
        for line in key.read_text().splitlines()[1:-1]:  # the private key's base64 lines
            assert line not in message
        assert key.with_suffix(".pub").read_text().split()[1] not in message  # nor the public blob


@pytest.fixture
def stranger_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An ssh-agent of our own (ended by its pid) holding a key the sshd does not accept; HOME without keys."""
    key = _keygen(tmp_path / "agent_ed25519")
    with ssh_agent_holding(key, tmp_path / "agent.sock") as sock:
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        monkeypatch.setenv("HOME", str(tmp_path))
        yield key


def test_fingerprints_match_ssh_keygen(tmp_path: Path) -> None:
    key = _keygen(tmp_path / "k")
    assert fingerprint(key.with_suffix(".pub").read_text()) == _ssh_keygen_fingerprint(key)
    assert fingerprint("garbage") is None and fingerprint("ssh-ed25519 not*base64") is None


def test_a_refused_key_file_is_named_with_the_host(sshd: SshdHost, tmp_path: Path) -> None:
    key = _keygen(tmp_path / "id_stranger")
    with pytest.raises(ConnectFailed) as caught, open_transport(sshd.target(key_filename=str(key))) as t:
        t.run("true")
    message = str(caught.value)
    assert f"ssh {sshd.user}@127.0.0.1:{sshd.port}: authentication failed as {sshd.user}" in message
    assert f"tried: {key} ({_ssh_keygen_fingerprint(key)})" in message
    assert "authorized_keys on 127.0.0.1" in message
    _no_material(message, key)


def test_agent_keys_are_named_by_fingerprint(stranger_agent: Path, sshd: SshdHost, tmp_path: Path) -> None:
    with pytest.raises(ConnectFailed) as caught, open_transport(sshd.target(key_filename=None)) as t:
        t.run("true")
    message = str(caught.value)
    assert f"agent key {_ssh_keygen_fingerprint(stranger_agent)}" in message, message
    assert f"127.0.0.1:{sshd.port}" in message
    _no_material(message, stranger_agent)


def test_identities_only_says_what_was_left_out(stranger_agent: Path, sshd: SshdHost, tmp_path: Path) -> None:
    key = _keygen(tmp_path / "id_only")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host only-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {key}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    target = SshTarget("only-box", ssh_config_path=str(config))
    with pytest.raises(ConnectFailed) as caught, open_transport(target) as t:
        t.run("true")
    message = str(caught.value)
    assert message.startswith(f"ssh only-box ({sshd.user}@127.0.0.1:{sshd.port})"), message
    assert f"tried: {key} (" in message and "agent key" not in message
    assert "IdentitiesOnly yes" in message
    _no_material(message, key, stranger_agent)
