"""Unknown flags get a suggestion; a flag the host spells or splits differently is named as such.

On every real `--help` capture in the fixtures, then through `validate --host` (preflight on the
simulated host, which reads its grammar from the launcher's own --help as on a real host).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.helptext import parse_help, version_of_capture
from orchestrator.matrix.suggest import suggestions
from orchestrator.matrix.validate import translate_cell
from tests.paths import REPO, SGLANG_CAPTURES, require_fixtures
from tests.simhost import orchestrator, write_hosts

require_fixtures()

HELP_FILES = sorted(SGLANG_CAPTURES.glob("*/help.txt"))
MODEL = {"model-path": "/m"}


def release(path: Path) -> FlagGrammar:
    text = path.read_text()
    return parse_help(text, version_of_capture(text, str(path)))


def problem(grammar: FlagGrammar, flags: dict[str, object]) -> str:
    translation = translate_cell(grammar, {**MODEL, **flags})  # type: ignore[dict-item]
    assert not translation.ok
    return translation.problems[0]


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_a_near_miss_gets_the_flag_it_meant(help_file: Path) -> None:
    grammar = release(help_file)
    said = problem(grammar, {"attention-backnd": "fa3"})
    assert f"--attention-backnd does not exist in {grammar.release}; did you mean --attention-backend?;" in said
    assert said.endswith("unrecognized arguments: --attention-backnd fa3")
    assert problem(grammar, {"kv-cach-dtype": "bf16"}).count("did you mean --kv-cache-dtype?") == 1
    # Nothing close: no guess.
    assert "did you mean" not in problem(grammar, {"zzzz-qqqq": "1"})


@pytest.mark.parametrize("help_file", HELP_FILES, ids=lambda p: p.parent.name)
def test_a_prefix_of_several_flags_lists_them(help_file: Path) -> None:
    grammar = release(help_file)
    matches = [n for n in grammar.names() if n.startswith("--enable-dp")]
    assert len(matches) > 1
    said = problem(grammar, {"enable-dp": True})
    assert f"did you mean {' or '.join(matches[:3])}?" in said
    assert "ambiguous option: --enable-dp could match" in said


def test_the_nsa_dsa_rename_is_said_both_ways() -> None:
    old, new = release(SGLANG_CAPTURES / "0.5.9" / "help.txt"), release(SGLANG_CAPTURES / "0.5.23" / "help.txt")
    on_new = translate_cell(new, {**MODEL, "nsa-decode-backend": "flashmla_sparse"})
    assert on_new.ok and on_new.argv[-2:] == ["--dsa-decode-backend", "flashmla_sparse"]
    assert on_new.notes == []  # the cell is canonical already: it says dsa, as this release does
    on_old = translate_cell(old, {**MODEL, "dsa-decode-backend": "flashmla_sparse"})
    assert on_old.ok and on_old.notes == ["--dsa-decode-backend is --nsa-decode-backend in sglang 0.5.9"]
    # A typo of the old name on the new release names the new flag and the rename.
    said = problem(new, {"nsa-decode-backnd": "flashmla_sparse"})
    expected = "did you mean --dsa-decode-backend (--nsa-decode-backend is --dsa-decode-backend in sglang 0.5.23)?"
    assert expected in said
    assert suggestions(old, "nsa-decode-backnd") == ["--nsa-decode-backend"]


def test_a_split_flag_names_its_successors_and_predecessor() -> None:
    old, new = release(SGLANG_CAPTURES / "0.5.9" / "help.txt"), release(SGLANG_CAPTURES / "0.5.23" / "help.txt")
    said = problem(new, {"cuda-graph-bs": "8"})
    assert "sglang 0.5.23 has --cuda-graph-bs-decode and --cuda-graph-bs-prefill in its place" in said
    assert "ambiguous option: --cuda-graph-bs could match --cuda-graph-bs-decode, --cuda-graph-bs-prefill" in said
    assert "sglang 0.5.9 has --cuda-graph-max-bs in its place" in problem(old, {"cuda-graph-max-bs-decode": "8"})


def test_a_prefix_read_as_a_whole_flag_is_noted() -> None:
    grammar = release(SGLANG_CAPTURES / "0.5.9" / "help.txt")
    translation = translate_cell(grammar, {**MODEL, "mem-frac": "0.8"})
    assert translation.ok
    assert translation.notes == [
        "--mem-frac is read as --mem-fraction-static, the one sglang 0.5.9 flag it begins (write it in full)"
    ]


def test_validate_on_a_host_suggests_and_notes(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "flags: {model-path: /models/GLM-5, tp-size: 8}\n"
        "matrix:\n  backend: [{attention-backnd: fa3}, {attention-backend: fa3}]\n"
        "  dsa-decode-backend: [flashmla_sparse]\n"
    )
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "work", scenario=REPO / "configs/sim/glm5-nvfp4-sm120.yaml")
    result = orchestrator("validate", str(matrix), "--host", "simhost", "--hosts", str(hosts), db=tmp_path / "o.db")
    out = " ".join(result.stdout.split())
    assert result.returncode == 1, result.stdout + result.stderr  # one cell is invalid: validate says so by its exit
    assert "did you mean --attention-backend?" in out
    assert "ok (--dsa-decode-backend is --nsa-decode-backend in sglang 0.5.9)" in out
    assert "1 valid, 1 invalid" in out
    assert "sglang 0.5.9" in out and "sglang unknown" not in out
