"""Fixtures the end-to-end fault tests share: an sshd of a test's own, and the fault host over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fault_harness import FaultHost
from tests.sshd_host import SshdHost, login_user


@pytest.fixture
def own_sshd(sshd: SshdHost) -> Iterator[SshdHost]:
    """An sshd of this test alone (the tests kill its connections, stop and restart it)."""
    host = SshdHost(login_user()).start()
    yield host
    host.cleanup()


@pytest.fixture
def slow_host(own_sshd: SshdHost, tmp_path: Path) -> Iterator[FaultHost]:
    """The fault host over `own_sshd`, decoding slowly (0.05 s a token) so that a cut lands mid-probe."""
    fh = FaultHost(tmp_path, sshd=own_sshd, decode_s=0.05)
    yield fh
    fh.reap()
