"""Matrix expansion as data: each tests/cases/matrix/NAME.yaml expands to exactly NAME.json.

The expected files were written once by scripts/regen_cases and read by a person; a failure shows
the difference from them. Change one only when the expansion is meant to change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.case_files import MATRIX_CASES, diff, matrix_expansion, render

INPUTS = sorted(MATRIX_CASES.glob("*.yaml"))


def test_there_are_cases_and_each_has_its_expectation() -> None:
    assert len(INPUTS) >= 6
    assert sorted(p.stem for p in MATRIX_CASES.glob("*.json")) == [p.stem for p in INPUTS]


@pytest.mark.parametrize("path", INPUTS, ids=[p.stem for p in INPUTS])
def test_matrix_case(path: Path) -> None:
    expected = path.with_suffix(".json").read_text()
    actual = render(matrix_expansion(path))
    assert actual == expected, "\n" + diff(expected, actual, path.with_suffix(".json").name)
