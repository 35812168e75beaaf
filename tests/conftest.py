"""Fixtures shared across test modules. Keep only fixtures that several modules use here."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from orchestrator.transport import SshTarget
from tests import procs
from tests.sshd_host import SshdHost, login_user, missing_tools


def pytest_configure(config: pytest.Config) -> None:
    """Reap what a SIGKILLed run left, mark this run's processes (tests/procs.py) and end them on SIGTERM too."""
    procs.begin_run()

    def on_term(signum: int, frame: FrameType | None) -> None:
        procs.end_run()
        # Then as Ctrl-C: pytest tears the fixtures down and reports what ran.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Whatever way the run ends (passed, failed, Ctrl-C), nothing it started outlives it."""
    procs.end_run()


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
