"""`orchestrator --help` lists every command without importing any of them, and says what each one's own help says."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

from orchestrator import cli
from tests.paths import REPO

# main() ends the process itself (after the atexit handlers): the modules it loaded are listed by one.
_PROBE = """
import atexit, json, sys
sys.argv = ["orchestrator", *sys.argv[1:]]
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))
from orchestrator.cli import main
main()
"""


def _help_run(*argv: str) -> tuple[str, int, list[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=REPO,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})  # fmt: skip
    *text, last = done.stdout.rstrip("\n").split("\n")
    return "\n".join(text), done.returncode, json.loads(last)


def test_every_command_has_one_summary() -> None:
    assert set(cli.SUMMARIES) == set(cli.COMMANDS)


def test_summaries_equal_each_commands_own_help() -> None:
    app = cli.app  # loads every command module
    registered = {c.name or c.callback.__name__: c for c in app.registered_commands if c.callback is not cli._listed}
    assert set(registered) == set(cli.SUMMARIES)
    for name, info in registered.items():
        own = (info.help or inspect.getdoc(info.callback) or "").split("\n\n")[0].replace("\n", " ")
        assert own == cli.SUMMARIES[name], name


def test_root_help_lists_commands_without_loading_them() -> None:
    text, code, modules = _help_run("--help")
    assert code == 0
    for name, summary in cli.SUMMARIES.items():
        assert f"{name} " in text and summary[:40] in text
    loaded = {m for m in modules if m.startswith("orchestrator.cli.")}
    assert loaded == {"orchestrator.cli.root"}
    for heavy in ("fabric", "paramiko", "httpx", "orchestrator.sweep.engine", "orchestrator.config.load"):
        assert heavy not in modules


def test_unknown_command_is_refused_by_name() -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrator", "bogus"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert "No such command 'bogus'" in done.stderr


def test_a_named_command_loads_only_its_module() -> None:
    text, code, modules = _help_run("table", "--help")
    assert code == 0 and "Usage: orchestrator table" in text
    commands = {f"orchestrator.cli.{m}" for m in cli.COMMANDS.values()}
    assert {m for m in modules if m in commands} == {"orchestrator.cli.table"}


def test_usage_lines_name_arguments_as_design_does_and_paragraphs_are_not_cut() -> None:
    # DESIGN.md's contract spells the arguments `table [SWEEP]`, `compare A B`, `repro RUN`, `classify PATH...`;
    # each command's help must read the same (typer braces a required one), and a paragraph wraps at the
    # terminal's width, not mid-sentence.
    usages = {
        "table": "orchestrator table [OPTIONS] [SWEEP]",
        "explain": "orchestrator explain [OPTIONS] [SWEEP]",
        "report": "orchestrator report [OPTIONS] [SWEEP]",
        "compare": "orchestrator compare [OPTIONS] {A} [B]",
        "repro": "orchestrator repro [OPTIONS] {RUN}",
        "bugreport": "orchestrator bugreport [OPTIONS] {RUN}",
        "classify": "orchestrator classify [OPTIONS] {PATH...}",
        "validate": "orchestrator validate [OPTIONS] {MATRIX}",
    }
    for command, usage in usages.items():
        text, code, _ = _help_run(command, "--help")
        assert code == 0 and usage in text, text
    text, _, _ = _help_run("validate", "--help")
    lines = [line.strip() for line in text.splitlines()]
    assert not any(line in ("ship", "own") for line in lines), text
    assert "release whose flags ship with orchestrator" in " ".join(lines)
