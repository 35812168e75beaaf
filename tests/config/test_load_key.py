"""The matrix's `load:` key: the standard load's settings, `off`, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.load import load_matrix
from orchestrator.errors import ConfigErrors
from orchestrator.settings import LoadSettings, ProbeSettings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text("name: t\nmatrix: {attention-backend: [fa3, triton]}\n" + text)
    return path


def test_without_load_every_passing_cell_gets_the_standard_load(tmp_path: Path) -> None:
    assert load_matrix(write(tmp_path, "")).probes.load == LoadSettings(32, 8, 256, 128, 3)


def test_load_settings_are_all_optional(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, "load: {requests: 16, repeat: 5}\n"))
    assert matrix.probes.load == LoadSettings(requests=16, concurrency=8, input_len=256, output_len=128, repeat=5)
    # Stored with the sweep and read back for repro: the same load.
    assert ProbeSettings.from_dict(matrix.probes.to_dict()) == matrix.probes


def test_load_off_skips_it(tmp_path: Path) -> None:
    assert load_matrix(write(tmp_path, "load: off\n")).probes.load is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("load: {requests: 0}\n", "greater than or equal to 1"),
        ("load: {concurency: 4}\n", "concurency"),
        ("load: {repeat: 2.5}\n", "repeat"),
        ("load: sometimes\n", "load"),
    ],
)
def test_a_bad_load_names_the_line(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        load_matrix(write(tmp_path, text))
    error = caught.value.errors[0]
    assert error.line == 3 and words in str(error), str(error)
