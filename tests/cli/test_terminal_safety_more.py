"""classify and explain, through the real CLI, send no control character of a crafted log (with the changes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.cli.test_terminal_safety import CRAFTED, SGR, _on_a_terminal, _raw_controls, crafted_db  # noqa: F401
from tests.paths import REPO

LOG = (
    "[2026-01-02 03:04:05 TP0] Load weight begin. avail mem=78.00 GB\n"
    f"[2026-01-02 03:04:06 TP0] WARNING: {CRAFTED}\n"
    f"[2026-01-02 03:04:07 TP0] RuntimeError: CUDA error: an illegal memory access was encountered {CRAFTED}\n"
)


@pytest.fixture
def crafted_log(tmp_path: Path) -> Path:
    path = tmp_path / "crafted.log"
    path.write_text(LOG)
    return path


@pytest.mark.parametrize("several", [False, True])
def test_classify_of_a_crafted_log_sends_no_control_character(crafted_log: Path, several: bool) -> None:
    args = ["classify", str(crafted_log), *([str(crafted_log.parent)] if several else [])]
    result = CliRunner().invoke(app, args)
    assert "^[]0;all good^G" in result.output
    assert not _raw_controls(result.output), _raw_controls(result.output)
    printed = _on_a_terminal(args, REPO)
    assert SGR.search(printed) and "^[[32mALL TESTS PASSED" in printed
    assert not _raw_controls(SGR.sub("", printed).replace("\r\n", "\n")), repr(printed)
    assert "\x1b[32mALL" not in printed


def test_classify_json_is_kept_verbatim(crafted_log: Path) -> None:
    result = CliRunner().invoke(app, ["classify", str(crafted_log), "--json"])
    assert "\\u001b[2J" in result.output


def test_explain_and_compare_of_a_crafted_run_send_no_control_character(crafted_db: Path) -> None:  # noqa: F811
    for args in (["explain", "--db", str(crafted_db)], ["table", "--db", str(crafted_db), "-f", "md"]):
        printed = _on_a_terminal(args, REPO)
        assert not _raw_controls(SGR.sub("", printed).replace("\r\n", "\n")), (args, repr(printed))
        assert "\x1b[32mALL" not in printed
