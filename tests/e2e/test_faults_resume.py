"""`kill -9` of the orchestrator at seeded random moments of a sweep, each followed by `--resume` (issue 5).

Each point must end with the table of an uninterrupted sweep (status, phase, category, attempts of
every cell), no process of ours on the host (by `ps`: arguments or working directory in the test's
dirs) and no GPU held (the sim's nvidia-smi), and every launch the host saw on record in the store.
scripts/kill_resume runs twenty points; CI runs three here, one of them over SSH.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fault_kill import Baseline, expected_table, kill_and_resume, kill_host, uninterrupted
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Baseline]:
    """The uninterrupted sweep the resumed ones must equal."""
    fh = kill_host(tmp_path_factory.mktemp("baseline"))
    try:
        result = uninterrupted(fh)
        assert fh.leftovers() == [] and fh.gpu_holders() == []
    finally:
        fh.reap()
    assert result.table == expected_table()
    yield result


@pytest.mark.parametrize(
    ("seed", "over_ssh"),
    [(1, False), (9, True), (6, False)],
    ids=["early-local", "mid-ssh", "late-local"],  # kill at ~13%, ~46%, ~79% of the sweep
)
def test_kill_9_then_resume_gives_the_uninterrupted_table_and_leaves_nothing(
    baseline: Baseline, sshd: SshdHost, tmp_path: Path, seed: int, over_ssh: bool
) -> None:
    fh = kill_host(tmp_path, sshd if over_ssh else None)
    try:
        point = kill_and_resume(fh, seed, baseline)
    finally:
        fh.reap()
    report = f"{point.line()}\n{point.resume_output[-2000:]}"
    assert point.resume_rc == 0, report
    assert point.table == baseline.table, report
    assert point.leftovers == [], report
    assert point.unrecorded == [], report
