"""Fixtures of the host-lock tests: GPU UUIDs of one test alone, and a transport both locally and over a real
loopback sshd."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest

from orchestrator.host.lock import machine_lock_dir
from orchestrator.transport import open_transport
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LocalTransport
from tests.sshd_host import SshdHost


@pytest.fixture
def gpus() -> Iterator[list[str]]:
    """GPU UUIDs of this test alone (the machine lock lives in /tmp, shared by every test on the machine); the
    locks of both the pair and its first alone are removed after."""
    ids = [f"GPU-{uuid.uuid4()}" for _ in range(2)]
    yield ids
    for some in (ids, ids[:1]):
        shutil.rmtree(machine_lock_dir(some), ignore_errors=True)


@pytest.fixture(params=["local", "ssh"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    """The local transport, then one over the session's loopback sshd."""
    if request.param == "local":
        yield LocalTransport()
        return
    sshd: SshdHost = request.getfixturevalue("sshd")
    with open_transport(sshd.target()) as t:
        yield t
