"""Properties of check_argv, and CPython's own argparse as an oracle for its verdicts."""

from __future__ import annotations

import argparse
import sys
from functools import cache
from typing import NoReturn

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.matrix.grammar import FlagGrammar, FlagSpec
from orchestrator.matrix.validate import check_argv
from orchestrator.matrix.valuetypes import value_type
from tests.paths import REPO

VERSIONS = ("0.5.9", "0.5.23")
MODEL = ["--model-path", "/m"]
WORDS = st.text(alphabet="abcxyz019_.-= ", min_size=0, max_size=6)


@cache
def grammar(version: str) -> FlagGrammar:
    return FlagGrammar.from_json((REPO / "orchestrator" / "sim" / "grammars" / f"{version}.json").read_text())


def valid_items(spec: FlagSpec) -> st.SearchStrategy[list[str]]:
    """argv items that spell one use of spec correctly."""
    name = st.sampled_from(spec.names)
    if not spec.takes_value:
        return name.map(lambda n: [n])
    kind = value_type(spec)
    if spec.choices:
        value = st.sampled_from(spec.choices)
    elif kind is int:
        value = st.integers(0, 4096).map(str)
    elif kind is float:
        value = st.floats(0, 1, allow_nan=False).map(str)
    else:
        value = st.from_regex(r"[a-z0-9_./]{1,8}", fullmatch=True)
    low, high = {None: (1, 1), "?": (0, 1), "*": (0, 3), "+": (1, 3)}.get(spec.nargs) or (int(spec.nargs or 1),) * 2
    return st.tuples(name, st.lists(value, min_size=low, max_size=high)).map(lambda t: [t[0], *t[1]])


@st.composite
def valid_argv(draw: st.DrawFn, version: str) -> list[str]:
    specs = [s for s in grammar(version).flags if s.primary != "--help"]
    chosen = draw(st.lists(st.sampled_from(specs), max_size=8, unique=True))
    argv = list(MODEL)
    for spec in chosen:
        argv += draw(valid_items(spec))
    return argv


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_valid_combinations_are_accepted(version: str, data: st.DataObject) -> None:
    assert check_argv(grammar(version), data.draw(valid_argv(version))) is None


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_value_outside_the_choices_is_an_invalid_choice(version: str, data: st.DataObject) -> None:
    g = grammar(version)
    spec = data.draw(st.sampled_from([s for s in g.flags if s.choices and s.nargs is None]))
    bad = data.draw(
        st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(lambda v: v not in (spec.choices or ()))
    )
    argv = [*data.draw(valid_argv(version)), spec.primary, bad]
    error = check_argv(g, argv)
    assert error is not None and (error.kind, error.flag, error.value) == ("invalid_choice", spec.primary, bad)
    assert error.message.startswith(f"{g.prog}: error: argument {'/'.join(spec.names)}: invalid choice: '{bad}'")


class _Rejected(Exception):
    pass


class _Helped(Exception):
    pass


class _Oracle(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Rejected(f"{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Helped

    def print_help(self, file: object = None) -> None:
        pass


@cache
def oracle(version: str) -> _Oracle:
    """A real argparse parser with the grammar's options, allow_abbrev on as in SGLang."""
    parser = _Oracle(prog=grammar(version).prog, allow_abbrev=True)
    for spec in grammar(version).flags:
        if spec.primary == "--help":
            continue
        if spec.negatable:
            names = [n for n in spec.names if not n.startswith("--no-")]
            parser.add_argument(*names, action=argparse.BooleanOptionalAction, required=spec.required)
        elif not spec.takes_value:
            parser.add_argument(*spec.names, action="store_true", required=spec.required)
        else:
            nargs: str | int | None = spec.nargs if spec.nargs in (None, "?", "*", "+") else int(spec.nargs or 1)
            kind = value_type(spec)
            if kind is None:
                parser.add_argument(*spec.names, nargs=nargs, choices=spec.choices, required=spec.required)
            else:
                parser.add_argument(*spec.names, nargs=nargs, choices=spec.choices, required=spec.required, type=kind)
    return parser


def oracle_verdict(version: str, argv: list[str]) -> str | None:
    try:
        oracle(version).parse_args(argv)
    except _Rejected as rejected:
        return str(rejected)
    except _Helped:
        return None
    return None


@st.composite
def messy_argv(draw: st.DrawFn, version: str) -> list[str]:
    """Valid uses mixed with prefixes, `=` forms, unknown options, stray words, `--` and missing values."""
    names = grammar(version).names()
    pieces: list[list[str]] = [[] if draw(st.booleans()) else list(MODEL)]
    for _ in range(draw(st.integers(0, 6))):
        name = draw(st.sampled_from(names))
        kind = draw(st.integers(0, 7))
        if kind == 0:
            pieces.append(draw(valid_items(grammar(version).lookup(name))))  # type: ignore[arg-type]
        elif kind == 1:
            pieces.append([name[: draw(st.integers(3, len(name)))], *draw(st.lists(WORDS, max_size=2))])
        elif kind == 2:
            pieces.append([f"{name[: draw(st.integers(3, len(name)))]}={draw(WORDS)}"])
        elif kind == 3:
            pieces.append([name])
        elif kind == 4:
            pieces.append([f"--{draw(WORDS)}", *draw(st.lists(WORDS, max_size=2))])
        elif kind == 5:
            pieces.append(
                draw(
                    st.lists(
                        st.sampled_from(["-1", "-0.5", "-", "-x", "-h", "-hx", "-hh", "-h=1", "--", "x y", "-a b"]),
                        max_size=2,
                    )
                )
            )
        else:
            pieces.append([name, *draw(st.lists(WORDS, max_size=3))])
    return [item for piece in pieces for item in piece]


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="argparse's messages are those of CPython 3.11")
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_check_argv_agrees_with_cpython_argparse(version: str, data: st.DataObject) -> None:
    argv = data.draw(messy_argv(version))
    error = check_argv(grammar(version), argv)
    assert (error.message if error is not None else None) == oracle_verdict(version, argv)
