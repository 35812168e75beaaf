"""Fixtures shared across test modules. Keep only fixtures that several modules use here."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from orchestrator.transport import SshTarget
from tests.sshd_host import SshdHost, login_user, missing_tools


@pytest.fixture(scope="session")
def sshd() -> Iterator[SshdHost]:
    """A loopback sshd (tests/sshd_host.py) for the whole session; skipped (failed under CI) without OpenSSH."""
    missing = missing_tools()
    if missing:
        what = ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"CI=true but no {what}: scripts/test installs openssh-server with apt-get; "
                "run it as root, or install openssh-server and openssh-client yourself"
            )
        pytest.skip(f"no {what}: install openssh-server to run the SSH tests")
    host = SshdHost(login_user()).start()
    yield host
    host.cleanup()


@pytest.fixture(scope="session")
def ssh_target(sshd: SshdHost) -> SshTarget:
    """An SshTarget for the session's loopback sshd: its own key and known_hosts, no ~/.ssh/config."""
    return sshd.target()
