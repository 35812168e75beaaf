"""A value written as a shell variable reference (`$VAR`, `${VAR}`) is an error, not a literal.

Every value reaches the remote shell quoted, so `HF_TOKEN: ${ORCH_HF_TOKEN}` would hand the server the
eight characters `${ORCH_...}` as its token, and the night would fail at weight download. The user meant
`{secret: ORCH_HF_TOKEN}` (read from their shell at launch): the error says so, with the file and line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts, load_matrix
from orchestrator.errors import ConfigError, ConfigErrors

MATRIX = (
    "name: t\nhost: sim\nflags:\n  model-path: /m\n  api-key: {flag}\nenv:\n  HF_TOKEN: {env}\n"
    "matrix:\n  attention-backend: [triton]\n"
)


def _errors(call: object, path: Path) -> list[ConfigError]:
    with pytest.raises(ConfigError) as caught:
        call(path)  # type: ignore[operator]
    return caught.value.errors if isinstance(caught.value, ConfigErrors) else [caught.value]


@pytest.mark.parametrize(
    ("env", "var"),
    [("${ORCH_HF_TOKEN}", "ORCH_HF_TOKEN"), ('"${ORCH_HF_TOKEN}"', "ORCH_HF_TOKEN"), ("$ORCH_HF_TOKEN", "VAR")],
)
def test_env_reference_in_matrix(tmp_path: Path, env: str, var: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(flag="{secret: ORCH_API_KEY}", env=env))
    (error,) = _errors(load_matrix, path)
    assert (error.file, error.line) == (str(path), 7)
    assert "env HF_TOKEN" in str(error) and "not expanded" in str(error)
    assert f"{{secret: {var}}}" in (error.fix or "")


def test_plain_env_reference_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(flag="{secret: ORCH_API_KEY}", env="{secret: T}") + "  # x\n")
    path.write_text(path.read_text().replace("env:\n", "env:\n  CACHE_DIR: $SCRATCH\n"))
    (error,) = _errors(load_matrix, path)
    assert error.line == 7 and "'$SCRATCH'" in str(error) and "{secret: SCRATCH}" in (error.fix or "")


def test_flag_reference_in_matrix(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(flag="'${ORCH_API_KEY}'", env="{secret: ORCH_HF_TOKEN}"))
    (error,) = _errors(load_matrix, path)
    assert error.line == 5 and "--api-key" in str(error)
    assert "{secret: ORCH_API_KEY}" in (error.fix or "")


def test_text_with_a_dollar_is_a_value(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(flag="'pa$$word'", env="'$5 off'"))
    assert load_matrix(path).env["HF_TOKEN"] == "$5 off"


def test_env_reference_in_hosts(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    text = "box:\n  ssh: me@gpu:22\n  launcher: /x -m sglang.launch_server\n  gpus: 8\n  workdir: /w\n"
    path.write_text(text + "  env:\n    HF_TOKEN: ${ORCH_HF_TOKEN}\n")
    (error,) = _errors(load_hosts, path)
    assert error.line == 7 and "{secret: ORCH_HF_TOKEN}" in (error.fix or "")


def test_a_secret_that_looks_like_a_reference_is_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(flag="$ecretPassw0rd", env="{secret: ORCH_HF_TOKEN}"))
    (error,) = _errors(load_matrix, path)
    assert error.line == 5 and "ecretPassw0rd" not in f"{error} {error.fix}"
