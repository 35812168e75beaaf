"""Multi-value flags (`--cuda-graph-bs N [N ...]`), numeric value types, and the release a message names.

Checked against every real `--help` capture in the shared fixtures (each release's own parser
rebuilt by the simulated host is the oracle for the argv), so a capture added there is checked too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig
from orchestrator.host.facts import parse_version, sglang_version_command
from orchestrator.host.session import python_for
from orchestrator.matrix.argv import flags_from_argv
from orchestrator.matrix.expand import cell_id, expand
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help, version_of_capture
from orchestrator.matrix.validate import check_argv, translate_cell
from orchestrator.model import Cell, FlagList
from orchestrator.sim import argparser as sim_argparser
from orchestrator.store import Store
from orchestrator.store.records import cell_from_row, cell_to_row
from tests.faults_support import write_hosts, write_scenario
from tests.paths import SGLANG_CAPTURES, require_fixtures
from tests.simhost import orchestrator, processes_under

require_fixtures()

HELP_FILES = sorted(SGLANG_CAPTURES.glob("*/help.txt"))


def release(path: Path) -> FlagGrammar:
    text = path.read_text()
    return parse_help(text, version_of_capture(text, str(path)))


def sim_parser(grammar: FlagGrammar) -> argparse.ArgumentParser:
    """The simulated SGLang's parser for this release (the simulator keeps its own copy of the grammar type)."""
    return sim_argparser.build_parser(grammar)


def batch_flag(grammar: FlagGrammar) -> str:
    """The release's list-of-batch-sizes flag: `cuda-graph-bs`, or its 0.5.23 successor."""
    for name in ("cuda-graph-bs", "cuda-graph-bs-decode"):
        spec = grammar.lookup(name)
        if spec is not None:
            assert spec.nargs == "+"
            return name
    raise AssertionError(f"no cuda-graph batch-size flag in {grammar.version}")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


def test_there_are_captures_to_check() -> None:
    assert {p.parent.name for p in HELP_FILES} >= {"0.5.9", "0.5.23"}


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_an_axis_of_lists_gives_one_argument_per_value(help_file: Path, tmp_path: Path) -> None:
    grammar = release(help_file)
    flag = batch_flag(grammar)
    matrix = load_matrix(write(tmp_path, f"flags: {{model-path: /m}}\nmatrix:\n  {flag}: [[1, 2, 4], [1, 8, 16]]\n"))
    cells = expand(matrix)
    assert [c.flags[flag] for c in cells] == [FlagList([1, 2, 4]), FlagList([1, 8, 16])]
    parser = sim_parser(grammar)
    for cell, values in zip(cells, (["1", "2", "4"], ["1", "8", "16"]), strict=True):
        translation = translate_cell(grammar, cell.flags)
        assert translation.ok, translation.problems
        at = translation.argv.index(f"--{flag}")
        assert translation.argv[at : at + 4] == [f"--{flag}", *values]
        # The release's own argparse (rebuilt from its help) reads the values back as three ints.
        parsed = parser.parse_args(translation.argv)
        assert getattr(parsed, flag.replace("-", "_")) == [int(v) for v in values]


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_a_bad_choice_is_still_rejected_with_the_release_choices(help_file: Path) -> None:
    grammar = release(help_file)
    spec = grammar.lookup("attention-backend")
    assert spec is not None and spec.choices
    translation = translate_cell(grammar, {"model-path": "/m", "attention-backend": "not_a_backend"})
    assert not translation.ok
    assert f"choices: {', '.join(spec.choices)}" in translation.problems[0]
    listed = ", ".join(repr(c) for c in spec.choices)
    assert f"invalid choice: 'not_a_backend' (choose from {listed})" in translation.problems[0]
    assert "unknown" not in translation.problems[0]


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_a_string_of_several_values_is_refused_before_launch(help_file: Path) -> None:
    grammar = release(help_file)
    flag = batch_flag(grammar)
    translation = translate_cell(grammar, {"model-path": "/m", flag: "1 2 4"})
    assert not translation.ok
    problem = translation.problems[0]
    assert f"write them as a YAML list: `{flag}: [1, 2, 4]`" in problem
    assert f"argument --{flag}: invalid int value: '1 2 4'" in problem


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_value_types_fail_as_the_release_parser_does(help_file: Path) -> None:
    grammar = release(help_file)
    flag = batch_flag(grammar)
    parser = sim_parser(grammar)
    for argv in (
        ["--model-path", "/m", "--tp-size", "abc"],
        ["--model-path", "/m", f"--{flag}", "1", "x", "4"],
        ["--model-path", "/m", "--mem-fraction-static", "most"],
        ["--model-path", "/m", "--tp-size", "8", "--mem-fraction-static", "0.85", f"--{flag}", "1", "2"],
    ):
        error = check_argv(grammar, argv)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.suppress(SystemExit):
            parser.parse_args(argv)
        said = stderr.getvalue().strip().splitlines()
        assert (error.message if error else None) == (said[-1] if said else None)
    error = check_argv(grammar, ["--model-path", "/m", "--tp-size", "abc"])
    spec = grammar.lookup("tp-size")
    assert error is not None and spec is not None
    assert error.message == f"{grammar.prog}: error: argument {'/'.join(spec.names)}: invalid int value: 'abc'"
    cell = translate_cell(grammar, {"model-path": "/m", flag: FlagList(["1", "x"])})
    assert not cell.ok and "invalid int value: 'x'" in cell.problems[0]


def test_a_list_for_a_single_value_flag_says_so() -> None:
    grammar = release(SGLANG_CAPTURES / "0.5.9" / "help.txt")
    translation = translate_cell(grammar, {"model-path": "/m", "tp-size": FlagList(["1", "2"])})
    assert translation.problems[0].startswith("--tp-size takes one value in sglang 0.5.9, not a list of 2")


def test_messages_name_the_release_never_unknown(tmp_path: Path) -> None:
    text = (SGLANG_CAPTURES / "0.5.9" / "help.txt").read_text()
    anonymous = parse_help(text)
    problem = translate_cell(anonymous, {"model-path": "/m", "attention-backend": "x"}).problems[0]
    assert "this SGLang release" in problem and "unknown" not in problem
    saved = tmp_path / "captures" / "0.5.19" / "help.txt"
    saved.parent.mkdir(parents=True)
    saved.write_text(text)
    assert version_of_capture(text, str(saved)) == "0.5.19"
    assert version_of_capture(text, str(tmp_path / "help-0.5.4.post1.txt")) == "0.5.4.post1"
    assert version_of_capture(text, str(tmp_path / "help.txt")) is None


def test_lists_keep_their_identity_and_survive_the_store() -> None:
    as_list = {"cuda-graph-bs": FlagList([1, 2, 4])}
    as_text = {"cuda-graph-bs": "1 2 4"}
    assert cell_id(as_list) != cell_id(as_text)
    assert cell_id(as_list) == cell_id({"cuda-graph-bs": FlagList(["1", "2", "4"])})
    assert cell_id({"tp-size": 8}) == cell_id({"tp-size": "8"})  # scalars hash as before
    cell = Cell(cell_id=cell_id(as_list), flags=dict(as_list), axes=("cuda-graph-bs",))
    back = cell_from_row({**cell_to_row("s", 0, cell), "env_names": json.dumps([])})
    assert back.flags == cell.flags and isinstance(back.flags["cuda-graph-bs"], FlagList)
    assert back.flags["cuda-graph-bs"] == FlagList([1, 2, 4])  # the matrix's types, as for scalar values
    assert cell.label == "cuda-graph-bs=[1, 2, 4]"


def test_a_command_line_with_several_values_parses_to_a_list() -> None:
    grammar = release(SGLANG_CAPTURES / "0.5.9" / "help.txt")
    flags = flags_from_argv(["--cuda-graph-bs", "1", "2", "4", "--tp", "8"], grammar)
    assert flags == {"cuda-graph-bs": FlagList(["1", "2", "4"]), "tp-size": "8"}


def test_the_version_comes_from_the_host_install(tmp_path: Path) -> None:
    """A venv whose interpreter cannot say (no metadata, import fails) but whose `sglang` CLI can."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("#!/bin/sh\nexit 1\n")
    cli = '#!/bin/sh\n[ "$1" = version ] && printf "sglang version: 0.5.19\\ngit revision: abc1234\\n"\n'
    (bin_dir / "sglang").write_text(cli)
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    config = HostConfig(name="h", transport="local", launcher=f"{bin_dir}/sglang serve")
    python = python_for(config, shlex.split(config.launcher_for(None)))
    assert python == f"{bin_dir}/python"
    command = sglang_version_command(python, f"{bin_dir}/sglang")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30).stdout
    assert parse_version(out) == "0.5.19"
    # A real interpreter answers from the package metadata, else from the package's own __version__.
    installed = tmp_path / "site" / "sglang-0.5.7.dist-info"
    installed.mkdir(parents=True)
    (installed / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.7\n")
    checkout = tmp_path / "checkout" / "sglang"
    checkout.mkdir(parents=True)
    (checkout / "__init__.py").write_text('__version__ = "0.0.0.dev9596+g29b7f22d8"\n')
    for where, expected in ((installed.parent, "0.5.7"), (checkout.parent, "0.0.0.dev9596+g29b7f22d8")):
        command = f"PYTHONPATH={where} " + sglang_version_command(sys.executable)
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60).stdout
        assert parse_version(out) == expected


def test_a_sweep_launches_one_argument_per_value(tmp_path: Path) -> None:
    """On the simulated host, whose launcher is the release's argparse: the values arrive as a list of ints."""
    scenario = write_scenario(tmp_path / "scenario.yaml", [])
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario)
    matrix = write(
        tmp_path,
        "flags: {model-path: /models/llama}\n"
        "matrix:\n  cuda-graph-bs: [[1, 2, 4], [1, 8]]\n"
        "  graphs: [{cuda-graph-max-bs: 8}, {disable-cuda-graph: true}]\n",
    )
    out = tmp_path / "out.json"
    db = tmp_path / "o.db"
    result = orchestrator(
        "sweep", str(matrix), "--host", "faulthost", "--hosts", str(hosts), "--json-out", str(out), db=db, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    cells = json.loads(out.read_text())["cells"]
    assert [c["status"] for c in cells] == ["pass"] * 4
    assert [c["flags"]["cuda-graph-bs"] for c in cells] == [[1, 2, 4], [1, 2, 4], [1, 8], [1, 8]]
    with Store(db) as store:
        runs = store.runs(store.latest_sweep().sweep_id)  # type: ignore[union-attr]
    assert " --cuda-graph-bs 1 2 4 " in f"{runs[0].command} "
    assert runs[0].run_dir is not None
    log = (Path(runs[0].run_dir) / "server.log").read_text()
    assert "cuda_graph_bs=[1, 2, 4]" in log  # parsed by the release's parser as three ints
    assert processes_under(tmp_path / "work") == []
