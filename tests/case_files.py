"""Cases kept as data (tests/cases/matrix/, tests/cases/launch/): what each input must produce, as JSON.

The tests compare these renderings with the committed expected files and never write them;
scripts/regen_cases writes them once, for a person to read before committing.
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.config.hosts import load_hosts
from orchestrator.config.load import load_matrix
from orchestrator.host.launcher import render_cmd_sh
from orchestrator.host.session import HostSession
from orchestrator.matrix.expand import expand
from orchestrator.matrix.helptext import parse_help, version_of_capture
from orchestrator.model import FlagList, FlagValue
from orchestrator.planning.cells import plan_cell
from orchestrator.secret import SecretRef
from orchestrator.sweep.cell_run import Slot, build_spec
from orchestrator.transport.launch import LaunchRequest
from orchestrator.transport.local import LocalTransport
from tests.paths import CASES, SGLANG_CAPTURES, require_fixtures

require_fixtures()

MATRIX_CASES = CASES / "matrix"
LAUNCH_CASES = CASES / "launch"


def plain(value: FlagValue | object) -> Any:
    """A flag or env value as JSON: a secret as `{"secret": VAR}` (a reference, never a value)."""
    if isinstance(value, SecretRef):
        return {"secret": value.name}
    if isinstance(value, FlagList):
        return list(value)
    return value


def matrix_expansion(path: Path) -> dict[str, Any]:
    """The cells a matrix file expands to, in order: id, label, flags (and env / install when set)."""
    matrix = load_matrix(path)
    cells = []
    for cell in expand(matrix):
        row: dict[str, Any] = {"cell_id": cell.cell_id, "label": cell.label}
        row["flags"] = {name: plain(value) for name, value in cell.flags.items()}
        if cell.env:
            row["env"] = {name: plain(value) for name, value in cell.env.items()}
        if cell.install:
            row["install"] = cell.install
        cells.append(row)
    return {"axes": list(expand(matrix)[0].axes) if cells else [], "cells": cells}


def render(data: object) -> str:
    """The committed form of an expected JSON file."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def diff(expected: str, actual: str, name: str) -> str:
    """A unified diff, expected file first, for a failing case's message."""
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True), f"{name} (expected)", f"{name} (now)"
    )
    return "".join(lines)


WORKDIR = "<workdir>"
"""How a launch case's expected files write the host's working directory (a fresh one per test)."""


@dataclass(frozen=True)
class LaunchRendering:
    """What one launch case produced: its expected-file texts, and where a secret's value leaked."""

    files: dict[str, str]
    leaks: list[str]


def case_environ(case: Path) -> dict[str, str]:
    """The orchestrator's environment a launch case runs in (where its secrets come from)."""
    environ = yaml.safe_load((case / "case.yaml").read_text()).get("environ") or {}
    return {str(k): str(v) for k, v in environ.items()}


def launch_case(case: Path, workdir: Path) -> LaunchRendering:
    """What the orchestrator writes for a launch case: `cmd.sh`, and `launch.json` (argv, env, secrets).

    `case` holds hosts.yaml (one host), matrix.yaml and case.yaml (`release`: the SGLang --help
    capture the host's grammar comes from; `cell`: which cell, by index; `slot`; `run_id`;
    `environ`: the orchestrator's environment, which the caller must have set). The spec is built
    by the sweep's own `build_spec` on a real local session whose working directory is `workdir`,
    and `cmd.sh` / `env.masked` are read back from the run directory the launcher wrote there.
    """
    settings = yaml.safe_load((case / "case.yaml").read_text())
    (host,) = load_hosts(case / "hosts.yaml").values()
    host = dataclasses.replace(host, workdir=str(workdir))
    matrix = load_matrix(case / "matrix.yaml")
    cell = expand(matrix)[settings.get("cell", 0)]
    help_path = SGLANG_CAPTURES / settings["release"] / "help.txt"
    help_text = help_path.read_text()
    plan = plan_cell(cell, parse_help(help_text, version_of_capture(help_text, str(help_path))), host.gpus)
    slot = Slot(gpus=tuple(settings["slot"]["gpus"]), port=settings["slot"]["port"])
    session = HostSession(host, LocalTransport())
    try:
        spec, secrets = build_spec(session, plan, slot, settings["run_id"], matrix)
        session.launcher.prepare(spec)
    finally:
        session.close()
    run_dir = Path(spec.run_dir)
    cmd_sh = (run_dir / "cmd.sh").read_text()
    env_masked = (run_dir / "env.masked").read_text()
    request = LaunchRequest.build(f"bash {run_dir / 'cmd.sh'}", spec.log_path, spec.pid_path, spec.run_dir, secrets)
    launch = {
        "cell_id": cell.cell_id,
        "label": cell.label,
        "plan_problems": list(plan.problems),
        "plan_notes": list(plan.notes),
        "argv": [plain(word) for word in spec.argv],
        "env_masked": env_masked.splitlines(),
        "secret_names": list(spec.secret_names),
        "secrets_on_stdin": sorted(_stdin_secrets(request.stdin)),
        "cmd_sh_mode": oct((run_dir / "cmd.sh").stat().st_mode & 0o777),
        "cmd_sh_is_render_cmd_sh": cmd_sh == render_cmd_sh(spec),
    }
    written = {"cmd.sh": cmd_sh, "env.masked": env_masked, "the launch command": request.command}
    leaks = [f"{name} in {what}" for name, value in secrets.items() for what, text in written.items() if value in text]
    if _stdin_secrets(request.stdin) != secrets:
        leaks.append("the launch channel's stdin does not carry exactly the launch's secrets")
    files = {"cmd.sh": cmd_sh, "launch.json": render(launch)}
    return LaunchRendering({k: v.replace(str(workdir), WORKDIR) for k, v in files.items()}, leaks)


def _stdin_secrets(stdin: bytes) -> dict[str, str]:
    """Name -> value of the `NAME=base64` lines the launch wrapper reads from its stdin."""
    pairs = (line.split("=", 1) for line in stdin.decode().splitlines() if line)
    return {name: base64.b64decode(value).decode() for name, value in pairs}
