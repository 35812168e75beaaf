"""Fixtures shared across test modules. Keep only fixtures that several modules use here."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from orchestrator.transport import SshTarget
from tests import procs
from tests.slurm_cluster import SlurmCluster
from tests.slurm_cluster import missing_tools as missing_slurm_tools
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


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A real munged + slurmctld + slurmd on loopback (tests/slurm_cluster.py) for the whole session.

    Skipped without Slurm (failed under CI, where scripts/test installs it). The daemons are stopped by
    pid at the end, also when the session is interrupted (Ctrl-C, SIGTERM) or ends without teardown.
    """
    missing = ", ".join(missing_slurm_tools())
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no {missing}: scripts/test installs slurmctld slurmd slurm-client munge")
        pytest.skip(f"no {missing}: install slurmctld slurmd slurm-client munge to run the Slurm tests")
    # A short path: slurmd's and munged's socket paths must fit in sun_path (108 bytes).
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="orch-slurm-")))
    atexit.register(cluster.stop)
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        shutil.rmtree(cluster.root, ignore_errors=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
