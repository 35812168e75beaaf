"""Launches as data: each tests/cases/launch/NAME/ (hosts.yaml + matrix.yaml + case.yaml) makes exactly
its `cmd.sh` and `launch.json` (argv, env.masked, secrets), built by the sweep's own `build_spec` and
written by the launcher into a real run directory; no secret's value is in any file or command.

The expected files were written once by scripts/regen_cases and read by a person; a failure shows
the difference from them. Change one only when the launch is meant to change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.case_files import LAUNCH_CASES, case_environ, diff, launch_case

CASES = sorted(p for p in LAUNCH_CASES.iterdir() if p.is_dir())
EXPECTED = ("cmd.sh", "launch.json")


def test_there_are_cases_and_each_is_complete() -> None:
    assert len(CASES) >= 5
    for case in CASES:
        assert sorted(p.name for p in case.iterdir()) == sorted(["hosts.yaml", "matrix.yaml", "case.yaml", *EXPECTED])


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_launch_case(case: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in case_environ(case).items():
        monkeypatch.setenv(name, value)
    rendering = launch_case(case, tmp_path_factory.mktemp("workdir"))
    assert rendering.leaks == []
    for name in EXPECTED:
        expected = (case / name).read_text()
        actual = rendering.files[name]
        assert actual == expected, f"\n{diff(expected, actual, f'{case.name}/{name}')}"
