"""A repro script neither holds nor prints a control character (issue 33, broken 5).

The script is printed to a terminal (`repro --script`), read with `cat`, and when run prints the
server's log: a crafted flag value or log line must reach the terminal as text, while the launch
still gets the very bytes the run had.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.model import Category, Cell, Phase, ProbeOutcome, Status, Verdict
from orchestrator.report import repro_probe
from orchestrator.report.repro import _SHOW_PY, render_repro_script, shell_quote
from orchestrator.store import RunRecord, SweepRecord
from orchestrator.textsafe import visible

CRAFTED = "x\x1b[2J\x1b]0;title\x07\x1b[32mALL TESTS PASSED\x1b[0m\r\x08\x7f\x9b2J\u202e'\\\"$(id)"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@given(st.text())
def test_the_standalone_probe_shows_text_as_the_tool_does(text: str) -> None:
    assert repro_probe.visible(text) == visible(text)


@settings(max_examples=30, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20).map(lambda t: t + CRAFTED))
def test_a_word_with_control_characters_is_quoted_to_the_same_bytes(word: str) -> None:
    quoted = shell_quote(word)
    assert not RAW.search(quoted)
    printed = subprocess.run(["bash", "-c", f"printf %s {quoted}"], capture_output=True, check=True).stdout
    assert printed == word.encode()


def test_the_script_of_a_crafted_run_holds_no_control_character_and_parses() -> None:
    cell = Cell(cell_id="c0ffee0002", flags={"served-model-name": CRAFTED}, axes=("served-model-name",))
    run = RunRecord(
        run_id="r-0123456789",
        sweep_id="s-1",
        cell_id=cell.cell_id,
        attempt=1,
        host="sim",
        state="done",
        command=f"python3 -m sglang.launch_server --served-model-name {shlex.quote(CRAFTED)} --port 31000",
        env_masked={"NOTE": CRAFTED},
        started_at=0.0,
        outcome=ProbeOutcome(False, process_died=True),
        verdict=Verdict(Status.FAIL, Phase.MODEL_LOAD, Category.UNKNOWN, CRAFTED),
    )
    sweep = SweepRecord(sweep_id="s-1", name="m", host="sim", matrix_yaml="", started_at=0.0)
    script = render_repro_script(run, cell, sweep)
    assert not RAW.search(script), RAW.findall(script)
    assert "# Root cause: x^[[2J^[]0;title^G" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    # The launch line hands the server exactly the run's value.
    launch = next(line for line in script.splitlines() if "--served-model-name" in line)
    words = launch.split("--served-model-name ", 1)[1].split(" --port")[0]
    assert subprocess.run(["bash", "-c", f"printf %s {words}"], capture_output=True).stdout == CRAFTED.encode()


def test_the_log_tail_the_script_prints_is_shown_not_obeyed() -> None:
    log = f"[2026-01-02 03:04:05 TP0] {CRAFTED}\r\nnext line\n".encode() + b"\xff bad utf-8\n"
    shown = subprocess.run([sys.executable, "-c", _SHOW_PY], input=log, capture_output=True, check=True).stdout
    text = shown.decode()
    assert "^[[2J^[]0;title^G^[[32mALL TESTS PASSED" in text and "next line\n" in text
    assert not RAW.search(text)
