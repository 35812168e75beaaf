"""No control sequence from a log or a flag value reaches the terminal (issue 33, broken 5 and 8).

A crafted server log line clears the screen, retitles the window, moves the cursor back and prints a
green "ALL TESTS PASSED" over the `fail` verdict. Every control character of such text is shown
(`^[`), never obeyed, while the tool's own colours still work; and a 200 KB flag value costs no time.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.cli.common import exits_on_error
from orchestrator.errors import ConfigError
from orchestrator.safeconsole import SafeConsole
from orchestrator.store import Store
from orchestrator.textsafe import GuardedStream, elide, guard_stream, visible
from tests.cli.test_compare import SIM_059, sim_host
from tests.paths import REPO
from tests.store.test_records import make_cell, make_outcome, make_run, make_sweep, make_verdict

CRAFTED = (
    "RuntimeError: CUDA error \x1b[2J\x1b[H\x1b]0;all good\x07\x1b[1A\x1b[2K\x1b[32mALL TESTS PASSED\x1b[0m"
    "\rpass\x08\x08\x7f \x9b2J \x9d0;title\x9c \u202etxt.exe\x1b[8m"
)
"""Clear screen, home, retitle (OSC ... BEL), cursor up, erase line, green text, CR, backspaces, DEL,
C1 CSI/OSC/ST, a right-to-left override, and conceal left open."""

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""A control character, as it would reach the terminal (newline and tab excepted)."""
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _raw_controls(text: str) -> list[str]:
    return RAW.findall(text)


def test_every_control_character_is_shown_and_nothing_else_changes() -> None:
    assert visible("\x1b[2J") == "^[[2J" and visible("\x07\x08\x7f") == "^G^H^?"
    assert visible("\x9b1m \u202e") == "\\x9b1m \\u202e"
    assert visible("a\r\nb\rc\n\td") == "a\nb^Mc\n\td"
    assert visible("plain: ünïcode ✓ [bold]") == "plain: ünïcode ✓ [bold]"


@given(st.text())
def test_nothing_a_terminal_obeys_is_left(text: str) -> None:
    shown = visible(text)
    assert not _raw_controls(shown)
    if not RAW.search(text):
        assert shown == text


def _console(color: bool) -> tuple[SafeConsole, io.StringIO]:
    out = io.StringIO()
    return SafeConsole(file=out, width=120, force_terminal=color, color_system="standard" if color else None), out


@pytest.mark.parametrize("color", [True, False])
def test_the_console_shows_a_crafted_line_in_strings_texts_and_tables_and_keeps_its_own_colours(color: bool) -> None:
    console, out = _console(color)
    console.print(f"* cell: [red]fail[/] {escape(CRAFTED)}", soft_wrap=True)
    console.print(Text(CRAFTED, style="bold"))
    table = Table("cause", "flag")
    table.add_row(CRAFTED, Text(CRAFTED))
    console.print(table)
    printed = out.getvalue()
    assert printed.count("^[[32mALL TESTS PASSED") == 4  # each one shown where it was, as text
    if color:
        assert "\x1b[31mfail\x1b[0m" in printed  # rich's styling still works
    assert not _raw_controls(SGR.sub("", printed)) and not re.search(r"\x1b\[(?:32|8)m", printed)
    assert (not color) == (not SGR.search(printed))


def test_a_200_kb_flag_value_prints_in_well_under_a_second_and_says_how_much_was_cut() -> None:
    console, out = _console(True)
    label = f"attention-backend=triton, json-model-override-args={'x' * 200_000}"
    started = time.perf_counter()
    console.print(f"* {escape(label)}: [green]pass[/], took 12.0s", soft_wrap=True)
    table = Table("cell")
    table.add_row(label)
    console.print(table)
    took = time.perf_counter() - started
    assert took < 0.5, took
    assert len(out.getvalue()) < 40_000
    assert f"of {len(label) + len('* : pass, took 12.0s')} characters not shown" in out.getvalue()
    assert out.getvalue().count("attention-backend=triton") == 2 and "took 12.0s" in out.getvalue()


def test_elide_keeps_both_ends_and_says_the_length() -> None:
    assert elide("abc", 10) == "abc"
    cut = elide("a" * 5000 + "b" * 5000, 1000)
    assert cut == "a" * 468 + " … [9064 of 10000 characters not shown] … " + "b" * 468 and elide(cut, 1000) == cut


def test_the_guard_shows_what_echo_writes_and_keeps_typer_colours() -> None:
    inner = io.StringIO()
    guard = GuardedStream(inner)
    guard.write(typer.style("fail", fg="red") + " " + CRAFTED + "\n")
    written = inner.getvalue()
    assert written.startswith("\x1b[31mfail\x1b[0m ")
    assert "^[[2J" in written and "^[]0;all good^G" in written and "^M" in written
    # The crafted line's own colour passes the backstop only as colour, and ends with the write.
    assert not _raw_controls(SGR.sub("", written)) and written.endswith("\x1b[0m")
    assert guard.isatty() is False and guard.encoding == inner.encoding


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_a_terminal_is_guarded_files_and_pipes_get_the_text_as_written() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    guarded = guard_stream(terminal)
    assert isinstance(guarded, GuardedStream) and guard_stream(guarded) is guarded
    assert guard_stream(pipe) is pipe  # CSV, JSON, Markdown into a file keep their bytes
    guarded.write(CRAFTED)
    assert "^[[2J" in terminal.getvalue() and not _raw_controls(SGR.sub("", terminal.getvalue()))


def test_an_error_message_carrying_a_flag_value_is_shown_not_obeyed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit), exits_on_error():
        raise ConfigError(f"bad value {CRAFTED!s}", file="m.yaml", line=3, fix="quote it")
    err = capsys.readouterr().err
    assert "^[[2J" in err and not _raw_controls(err)


@pytest.fixture
def crafted_db(tmp_path: Path) -> Path:
    db = tmp_path / "results.db"
    with Store(db) as store:
        sweep_id = "s-20261201-010000-aaaa"
        store.create_sweep(make_sweep(sweep_id))
        cell = make_cell(f"triton{CRAFTED}")
        store.save_cells(sweep_id, [cell])
        run = make_run(cell, sweep_id=sweep_id)
        store.create_run(run)
        store.finish_run(run.run_id, make_outcome(30.0), None, make_verdict(root_cause_line=CRAFTED), {})
    return db


@pytest.mark.parametrize("wide", [[], ["--wide"]])
def test_table_of_a_crafted_run_sends_no_control_character(crafted_db: Path, wide: list[str]) -> None:
    result = CliRunner().invoke(app, ["table", "--db", str(crafted_db), *wide])
    assert result.exit_code == 0, result.output
    assert "^[[32mALL TESTS PASSED" in result.output
    assert not _raw_controls(result.output), _raw_controls(result.output)


def test_validate_shows_a_flag_value_holding_escapes(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text('matrix:\n  attention-backend: ["triton\\e[2J\\e]0;x\\a", dsa]\n')
    result = CliRunner().invoke(app, ["validate", str(matrix)])
    assert "triton^[[2J" in result.output
    assert not _raw_controls(result.output), _raw_controls(result.output)


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """What `orchestrator ARGS` writes to a real pseudo-terminal (rich and click colour it then)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args], stdout=follower, stderr=follower, cwd=cwd, env=env
    )
    os.close(follower)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command ended and closed its side
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        process.kill() if process.poll() is None else None
        process.wait()
        os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_table_on_a_real_terminal_is_coloured_and_obeys_nothing_of_the_log(crafted_db: Path) -> None:
    printed = _on_a_terminal(["table", "--db", str(crafted_db)], REPO)
    assert SGR.search(printed), printed  # the table's own colours
    assert "^[[32mALL" in printed  # the crafted colour, shown as text
    assert not _raw_controls(SGR.sub("", printed).replace("\r\n", "\n")), repr(printed)
    assert not re.search(r"\x1b\[(?:32|8)m", printed)


def test_a_sweep_shows_a_flag_value_holding_escapes_in_its_progress_and_table(tmp_path: Path) -> None:
    hosts, matrix, db = tmp_path / "hosts.yaml", tmp_path / "m.yaml", tmp_path / "o.db"
    hosts.write_text(sim_host("simt", tmp_path / "work", f"  scenario: {SIM_059}\n"))
    matrix.write_text(
        "name: crafted\nhost: simt\nflags: {model-path: /models/m, tp-size: 1, kv-cache-dtype: bf16}\n"
        'matrix: {served-model-name: ["m\\e[2J\\e]0;t\\a\\e[32mALL TESTS PASSED", plain]}\n'
        "probes: {settle_s: 0.1, concurrent_requests: 1}\n"
    )
    result = CliRunner().invoke(app, ["sweep", str(matrix), "--hosts", str(hosts), "--db", str(db)])
    assert result.exit_code == 0, result.output
    # In the progress line and in the table (rich drops BEL, backspace and CR itself: harmless).
    assert result.output.count("m^[[2J^[]0;t^[[32mALL TESTS PASSED") == 2
    assert not _raw_controls(result.output), _raw_controls(result.output)


def test_a_sweep_on_a_real_terminal_with_its_live_panel_obeys_nothing_of_a_flag_value(tmp_path: Path) -> None:
    hosts, matrix, db = tmp_path / "hosts.yaml", tmp_path / "m.yaml", tmp_path / "o.db"
    hosts.write_text(sim_host("simp", tmp_path / "work", f"  scenario: {SIM_059}\n"))
    matrix.write_text(
        "name: crafted\nhost: simp\nflags: {model-path: /models/m, tp-size: 1, kv-cache-dtype: bf16}\n"
        'matrix: {served-model-name: ["m\\e[2J\\e]0;t\\a\\e[32mALL TESTS PASSED", plain]}\n'
        "probes: {settle_s: 0.1, concurrent_requests: 1}\n"
    )
    printed = _on_a_terminal(["sweep", str(matrix), "--hosts", str(hosts), "--db", str(db)], REPO)
    assert "m^[[2J^[]0;t^[[32mALL TESTS PASSED" in printed and "2 cells: 2 fail" in printed
    assert "\x1b[2J" not in printed and "\x1b]" not in printed and "\x1b[32mALL" not in printed
    # What is left is rich's own: colours, and the live panel's cursor moves over its own lines.
    own = re.compile(r"\x1b\[[0-9;]*[mAKG]|\x1b\[\?25[lh]|\r")
    assert not _raw_controls(own.sub("", printed)), repr(printed)
