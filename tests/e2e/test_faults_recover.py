"""The orchestrator dying at exactly the awkward moments, then `--resume` (in-process, so the moment is exact).

A death is simulated by raising `Died` (a BaseException nothing catches) at one chosen call: after
a launch but before the store heard of it, before invalid cells were recorded, and after a stop
that failed left a server running. The kill -9 tests (test_faults_resume.py) hit random moments;
these hit the ones a random moment rarely does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.model import effective_deadlines
from orchestrator.errors import TransportError
from orchestrator.host.launcher import Launch, Launcher, Stopped
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from orchestrator.sweep import engine, recover, stages
from orchestrator.sweep.engine import SweepHooks, SweepOptions, run_sweep
from orchestrator.sweep.execute import RunSettings
from tests.fault_harness import EXPECTED, FaultHost, sweep_in_process

PASSING = "attention-backend=flashinfer, kv-cache-dtype=bf16"


class Died(BaseException):
    """The orchestrator process ends here (nothing in it may catch this)."""


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FaultHost]:
    """A local simulated host (no SSH: these tests are about the store and the host's run dirs)."""
    fh = FaultHost(tmp_path)
    yield fh
    fh.reap()


def _die_once(real: Callable[..., Any]) -> Callable[..., Any]:
    calls: list[int] = []

    def dying(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            raise Died
        return real(*args, **kwargs)

    return dying


def _resume(fh: FaultHost, **hooks: Any) -> str:
    matrix, config = fh.matrix(), fh.host()
    options = SweepOptions(settings=RunSettings(effective_deadlines(config, matrix), matrix.probes))
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        return run_sweep(store, matrix, [config], options, SweepHooks(**hooks), resume=sweep.sweep_id).sweep_id


def _runs(fh: FaultHost) -> list[RunRecord]:
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        return store.runs(sweep.sweep_id)


def test_a_launch_the_store_never_heard_of_is_reattached_not_relaunched(
    host: FaultHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dies between the launch and `mark_launched`: the run row says pending, the pid file says launched.
    monkeypatch.setattr(Store, "mark_launched", _die_once(Store.mark_launched))
    with pytest.raises(Died):
        sweep_in_process(host, packed=False)
    (pending,) = [r for r in _runs(host) if r.state == "pending"]
    assert Path(pending.run_dir or "", "pid").read_text().strip().isdigit()
    reattached: list[tuple[str, bool]] = []
    _resume(host, on_reattach=lambda run, alive: reattached.append((run.run_id, alive)))
    assert reattached == [(pending.run_id, True)]
    assert host.table() == EXPECTED
    assert host.launch_counts() == {"run_dirs": 4, "pid_files": 4, "server_args": 4, "sim_launches": 4}
    assert sorted(r.state for r in _runs(host)) == ["done"] * 4
    assert host.leftovers() == [] and host.gpu_holders() == []


def test_invalid_cells_not_yet_recorded_are_recorded_on_resume(
    host: FaultHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.write_matrix(cells="  include: [{attention-backend: no_such_backend}]\n")
    monkeypatch.setattr(engine, "record_invalid", _die_once(recover.record_invalid))
    with pytest.raises(Died):
        sweep_in_process(host)
    assert _runs(host) == []
    _resume(host)
    table = host.table()
    status, phase, category, attempts = table.pop("attention-backend=no_such_backend")
    assert (status, phase, category, attempts) == ("invalid", "preflight", "invalid_argument", "0/1")
    assert table == EXPECTED


def _stop_fails_for(label_words: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Make stopping the launch whose argv has all of `label_words` fail as if the host were unreachable."""
    real = Launcher.stop

    def stop(self: Launcher, launch: Launch, grace_s: float, then: str | None = None) -> Stopped:
        if all(word in launch.spec.argv for word in label_words):
            raise TransportError("test: the host stopped answering while stopping this launch")
        return real(self, launch, grace_s, then)

    monkeypatch.setattr(Launcher, "stop", stop)


def test_a_launch_whose_stop_failed_does_not_outlive_the_sweep(
    host: FaultHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stop_fails_for(("flashinfer", "bf16"), monkeypatch)
    sweep_in_process(host)
    status, _, _, attempts = host.table()[PASSING]
    assert (status, attempts) == ("infra", "0/1")
    (run,) = [r for r in _runs(host) if r.verdict and r.verdict.status.value == "infra"]
    assert run.verdict is not None and "stopped answering" in run.verdict.reason
    assert host.leftovers() == [] and host.gpu_holders() == []


def test_orphans_of_a_dead_orchestrator_are_reaped_as_ours_before_preflight(
    host: FaultHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stop_fails_for(("flashinfer", "bf16"), monkeypatch)
    monkeypatch.setattr(stages, "reap_orphans", _die_once(recover.reap_orphans))
    with pytest.raises(Died):  # dies at the end, before it could end the server it failed to stop
        sweep_in_process(host)
    (orphan,) = [r for r in _runs(host) if r.verdict and r.verdict.status.value == "infra"]
    assert host.gpu_holders(), "the orphan holds its GPU"
    monkeypatch.undo()
    reaped: list[int] = []
    real_reap = recover.reap_orphans

    def recording_reap(*args: Any, **kwargs: Any) -> list[int]:
        reaped.extend(real_reap(*args, **kwargs))
        return reaped

    monkeypatch.setattr(stages, "reap_orphans", recording_reap)
    _resume(host)
    assert reaped == [orphan.pgid]
    assert host.table()[PASSING][0] == "infra"
    assert host.leftovers() == [] and host.gpu_holders() == []
