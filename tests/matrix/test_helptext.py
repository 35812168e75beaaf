"""parse_help against the real `--help` captures of SGLang 0.5.9 and 0.5.23, and argparse-made help."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from orchestrator.matrix import gen_grammars
from orchestrator.matrix.grammar import FlagGrammar, FlagSpec
from orchestrator.matrix.helptext import parse_help
from tests.paths import REPO, SGLANG_CAPTURES, require_fixtures

require_fixtures()

VERSIONS = ("0.5.9", "0.5.23")
# Where the capture's flags.json is weaker than the help text: it prints a metavar for the
# choices of nargs="*" options (`[{q_proj,...} ...]`), which parser.json confirms are choices.
FLAGS_JSON_MISSES_CHOICES = {"--lora-target-modules"}
# Options SGLang registers with help=SUPPRESS: in the parser, never in `--help`.
HIDDEN = {"0.5.9": set(), "0.5.23": {"--forward-pass-metrics-worker-id", "--forward-pass-metrics-ipc-name"}}


def grammar(version: str) -> FlagGrammar:
    return parse_help((SGLANG_CAPTURES / version / "help.txt").read_text(), version)


def by_name(g: FlagGrammar) -> dict[str, FlagSpec]:
    return {name: spec for spec in g.flags for name in spec.names}


@pytest.mark.parametrize("version", VERSIONS)
def test_agrees_with_flags_json(version: str) -> None:
    expected: dict[str, Any] = json.loads((SGLANG_CAPTURES / version / "flags.json").read_text())
    specs = by_name(grammar(version))
    assert set(specs) == set(expected)
    for name, want in expected.items():
        spec = specs[name]
        assert spec.takes_value == want["takes_value"], name
        # flags.json lists the short `-h` too; a grammar holds long spellings only.
        assert set(spec.names) - {name} == {a for a in want["aliases"] if a.startswith("--")}, name
        if name in FLAGS_JSON_MISSES_CHOICES:
            assert want["choices"] is None and spec.choices
        else:
            want_choices = set(want["choices"]) if want["choices"] is not None else None
            assert (set(spec.choices) if spec.choices is not None else None) == want_choices, name


@pytest.mark.parametrize("version", VERSIONS)
def test_agrees_with_sglangs_own_parser(version: str) -> None:
    dump: dict[str, Any] = json.loads((SGLANG_CAPTURES / version / "parser.json").read_text())
    specs = by_name(grammar(version))
    hidden = {a["option_strings"][0] for a in dump["actions"] if a["hidden"]}
    assert hidden == HIDDEN[version]
    for action in dump["actions"]:
        if action["hidden"]:
            continue
        long_names = tuple(o for o in action["option_strings"] if o.startswith("--"))
        spec = specs[long_names[0]]
        assert spec.names == long_names
        assert spec.takes_value == (action["nargs"] != 0)
        assert spec.nargs == (None if action["nargs"] in (None, 0) else str(action["nargs"])), long_names
        assert spec.required == action["required"]
        assert spec.negatable == (action["action"] == "BooleanOptionalAction"), long_names
        choices = action["choices"]
        if action["choices_is_set"]:  # a Python set: help order depends on PYTHONHASHSEED
            assert set(spec.choices or ()) == set(choices)
        else:
            assert spec.choices == (tuple(choices) if choices is not None else None), long_names
    assert len(grammar(version).flags) == len(dump["actions"]) - len(hidden)


def test_prog_names_and_required() -> None:
    old, new = grammar("0.5.9"), grammar("0.5.23")
    assert (old.prog, new.prog) == ("launch_server.py", "sglang serve")
    for g in (old, new):
        assert [s.names for s in g.flags if s.required] == [("--model-path", "--model")]
    assert old.lookup("--tp-size") is old.lookup("--tensor-parallel-size")
    assert old.lookup("--tp-size").primary == "--tensor-parallel-size"  # type: ignore[union-attr]
    assert new.lookup("--tp-size").primary == "--tp-size"  # type: ignore[union-attr]


def test_negatable_flags() -> None:
    assert not [s for s in grammar("0.5.9").flags if s.negatable]
    negatable = [s for s in grammar("0.5.23").flags if s.negatable]
    assert len(negatable) == 12
    tf32 = grammar("0.5.23").lookup("--no-enable-tf32-matmul")
    assert tf32 is not None and tf32.names == ("--enable-tf32-matmul", "--no-enable-tf32-matmul")
    assert not tf32.takes_value
    hicache = grammar("0.5.23").lookup("--enable-hicache")  # an alias that only looks like a pair
    assert hicache is not None and not hicache.negatable


def test_nargs_forms() -> None:
    g = grammar("0.5.23")
    assert g.lookup("--model-checksum").nargs == "?"  # type: ignore[union-attr]
    assert g.lookup("--lora-paths").nargs == "*"  # type: ignore[union-attr]
    assert g.lookup("--log-requests-target").nargs == "+"  # type: ignore[union-attr]
    modules = g.lookup("--lora-target-modules")
    assert modules is not None and modules.nargs == "*" and modules.choices and "all" in modules.choices
    assert g.lookup("--tp-size").metavar == "TP_SIZE"  # type: ignore[union-attr]


def test_stray_lines_before_usage_and_version_from_text() -> None:
    help_text = (SGLANG_CAPTURES / "0.5.23" / "help.txt").read_text()
    stderr = (SGLANG_CAPTURES / "0.5.23" / "help.stderr.txt").read_text()
    noisy = parse_help(stderr + help_text)
    assert noisy.flags == grammar("0.5.23").flags and noisy.prog == "sglang serve"
    assert noisy.version == "unknown"
    assert parse_help(f"sglang version: 0.5.23\ngit revision: N/A\n{help_text}").version == "0.5.23"
    assert parse_help(help_text, "0.5.23.dev1").version == "0.5.23.dev1"


def test_truncated_choice_list_falls_back_to_usage() -> None:
    text = (
        "usage: sglang serve [-h] [--quantization {awq,fp8,gptq}]\n\n"
        "options:\n  -h, --help  show this help message and exit\n  --quantization {awq,fp8,gp\n"
    )
    spec = parse_help(text, "x").lookup("--quantization")
    assert spec is not None and spec.choices == ("awq", "fp8", "gptq")


def test_no_usage_is_an_error() -> None:
    with pytest.raises(ValueError, match="usage"):
        parse_help("Traceback (most recent call last):\n", "0.5.9")


def _sample_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang serve")
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--mode", choices=["a", "b-c", "d_e"], required=True)
    parser.add_argument("--pair", nargs=2, metavar="P")
    parser.add_argument("--pick", nargs=2, choices=["x", "y"])
    parser.add_argument("--opt", nargs="?", choices=["p", "q"])
    parser.add_argument("--many", nargs="*")
    parser.add_argument("--some", nargs="+", choices=["s", "t"])
    parser.add_argument("--switch", action=argparse.BooleanOptionalAction, required=True)
    parser.add_argument("--flag", "--alias-flag", action="store_true")
    return parser


@pytest.mark.parametrize("columns", ["40", "80", "200"])
def test_round_trip_of_argparse_made_help(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    parser = _sample_parser()
    g = parse_help(parser.format_help(), "x")
    assert g.prog == "sglang serve"
    for action in parser._actions:
        spec = g.lookup(action.option_strings[-1])
        assert spec is not None
        assert spec.names == tuple(o for o in action.option_strings if o.startswith("--"))
        assert spec.takes_value == (action.nargs != 0)
        assert spec.nargs == (None if action.nargs in (None, 0) else str(action.nargs))
        assert spec.choices == (tuple(action.choices) if action.choices else None)
        assert spec.required == action.required
        assert spec.negatable == isinstance(action, argparse.BooleanOptionalAction)


def test_generated_grammars_are_current() -> None:
    rendered = gen_grammars.render(SGLANG_CAPTURES)
    assert set(rendered) == {f"{v}.json" for v in VERSIONS}
    for name, text in rendered.items():
        committed = (REPO / "orchestrator" / "sim" / "grammars" / name).read_text()
        assert committed == text, f"{name} is stale: run scripts/gen_grammars"
        assert FlagGrammar.from_json(committed).to_json() == committed
