"""Keys from ssh-agent when no key file is configured; `IdentitiesOnly yes` keeps the agent out (issue 16 item 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ConnectFailed
from orchestrator.transport import SshTarget, open_transport
from tests.sshd_host import SshdHost, ssh_agent_holding


@pytest.fixture
def agent(tmp_path: Path, sshd: SshdHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An ssh-agent of our own (killed by its pid) holding the loopback sshd's client key."""
    with ssh_agent_holding(sshd.client_key, tmp_path / "agent.sock") as sock:
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        monkeypatch.setenv("HOME", str(tmp_path))  # no default identity files of the machine's user
        yield sock


def _config(tmp_path: Path, sshd: SshdHost, extra: str = "") -> str:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host agent-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n{extra}"
    )
    return str(config)


def test_agent_key_logs_in_without_a_key_file(agent: str, sshd: SshdHost, tmp_path: Path) -> None:
    with open_transport(SshTarget("agent-box", ssh_config_path=_config(tmp_path, sshd))) as t:
        assert t.run("echo via agent").stdout == b"via agent\n"


def test_identities_only_keeps_the_agent_out(agent: str, sshd: SshdHost, tmp_path: Path) -> None:
    config = _config(tmp_path, sshd, "  IdentitiesOnly yes\n")
    with pytest.raises(ConnectFailed), open_transport(SshTarget("agent-box", ssh_config_path=config)) as t:
        t.run("true")
