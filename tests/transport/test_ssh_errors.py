"""A connection that cannot be opened says why in words, on a real loopback sshd (issue 35 item 2)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from orchestrator.errors import ConnectFailed
from orchestrator.transport import open_transport
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh


def test_a_bastion_that_cannot_reach_the_host_says_so(sshd: SshdHost, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    target = sshd.target(port=closed, proxy_jump="jump", ssh_config_path=str(config))
    logins = sshd.accepted_logins()
    with pytest.raises(ConnectFailed) as caught, open_transport(target) as t:
        t.run("true")
    message = str(caught.value)
    assert f"the bastion jump could not connect to 127.0.0.1 port {closed}: it said 'Connect failed'" in message
    assert f"check HostName and Port of this host as the bastion sees them, in {config}" in message
    assert sshd.accepted_logins() == logins + 1  # the bastion's login, and nothing past it
