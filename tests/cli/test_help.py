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
