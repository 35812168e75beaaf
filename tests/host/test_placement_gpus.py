"""The local placement's GPU questions on a simulated host: the lock's UUIDs and the preflight's facts share one
nvidia-smi start, and a driver too old for a field of that query still names its GPUs."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.host.session import HostSession
from tests import simhost

# Stands in front of the simulated nvidia-smi: writes down each call, and (with OLD_DRIVER set) refuses a
# compute_cap field the way a driver before 510 does.
_RECORDING_SMI = """#!/bin/sh
echo "$*" >> "{calls}"
if [ -n "{old_driver}" ]; then
  case "$*" in *compute_cap*) printf 'Field "compute_cap" is not a valid field to query.\\n\\n' >&2; exit 2;; esac
fi
exec "{real}" "$@"
"""


def _session(tmp_path: Path, *, old_driver: bool) -> tuple[HostSession, Path]:
    hosts = simhost.write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", gpus=4)
    session = HostSession.open(load_hosts(hosts)["simhost"])
    path = session.base_env["PATH"]
    real = next(Path(d) / "nvidia-smi" for d in path.split(":") if (Path(d) / "nvidia-smi").is_file())
    front = tmp_path / "front"
    front.mkdir()
    calls = tmp_path / "calls"
    smi = front / "nvidia-smi"
    smi.write_text(_RECORDING_SMI.format(calls=calls, old_driver="1" if old_driver else "", real=real))
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    session.base_env["PATH"] = f"{front}{os.pathsep}{path}"
    return session, calls


@pytest.fixture
def new_driver(tmp_path: Path) -> Iterator[tuple[HostSession, Path]]:
    session, calls = _session(tmp_path, old_driver=False)
    yield session, calls
    session.close()


@pytest.fixture
def old_driver(tmp_path: Path) -> Iterator[tuple[HostSession, Path]]:
    session, calls = _session(tmp_path, old_driver=True)
    yield session, calls
    session.close()


def _gpu_queries(calls: Path) -> list[str]:
    return [line for line in calls.read_text().splitlines() if "--query-gpu" in line]


def test_the_preflight_facts_reuse_the_answer_the_lock_asked_for(new_driver: tuple[HostSession, Path]) -> None:
    session, calls = new_driver
    uuids = session.placement.gpu_uuids()
    facts = session.placement.facts()
    assert len(uuids) == 4 and all(u.startswith("GPU-") for u in uuids)
    assert facts["gpu_name"] and facts["compute_cap"] and facts["gpus"] == "4"
    assert len(_gpu_queries(calls)) == 1
    # The answer is used once: a later preflight of the same session asks again.
    assert session.placement.facts() == facts
    assert len(_gpu_queries(calls)) == 2


def test_a_driver_without_compute_cap_still_gets_its_gpus_locked(old_driver: tuple[HostSession, Path]) -> None:
    session, calls = old_driver
    uuids = session.placement.gpu_uuids()
    assert len(uuids) == 4 and all(u.startswith("GPU-") for u in uuids)
    queries = _gpu_queries(calls)
    assert len(queries) == 2 and "compute_cap" in queries[0] and "compute_cap" not in queries[1]
    # The preflight then asks for itself and gets no GPU model, which gpu_problem tells apart from missing GPUs.
    facts = session.placement.facts()
    assert not facts.get("gpu_name")
    assert session.placement.gpu_problem(facts) is None


def test_a_worker_session_shares_the_connection_and_knows_the_gpus(new_driver: tuple[HostSession, Path]) -> None:
    session, calls = new_driver
    session.placement.facts()
    worker = session.placement.worker_session(None)
    try:
        assert worker.transport is session.transport and worker.placement is not session.placement
        assert worker.placement.holders(set()) == []  # the GPU list carried over: no second query to map UUIDs
        assert len(_gpu_queries(calls)) == 1 and worker.workdir == session.workdir
    finally:
        worker.close()
    assert session.transport.run("true", timeout=10).ok  # the worker's close left the host's connection open
