"""check_argv, parse_argparse_error and translate_cell against the real argparse captures."""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest

from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.validate import ArgvError, check_argv, translate_cell
from orchestrator.model import FlagValue
from tests.matrix.argparse_oracle import parse_argparse_error
from tests.paths import REPO, SGLANG_CAPTURES, require_fixtures

require_fixtures()

MODEL = ["--model-path", "/m"]


@cache
def grammar(version: str) -> FlagGrammar:
    return FlagGrammar.from_json((REPO / "orchestrator" / "sim" / "grammars" / f"{version}.json").read_text())


def captures() -> list[Path]:
    found = sorted(SGLANG_CAPTURES.glob("0.5.*/*.txt"))
    return [p for p in found if "sglang.launch_server --model-path" in p.read_text().splitlines()[1]]


def read_capture(path: Path) -> tuple[list[str], int, str]:
    """The launcher arguments, the exit code and the verbatim output of one capture."""
    lines = path.read_text().splitlines(keepends=True)
    argv = shlex.split(lines[1].split("sglang.launch_server", 1)[1])
    return argv, int(lines[2].removeprefix("# exit code:")), "".join(lines[4:])


def test_the_named_captures_are_all_checked() -> None:
    names = {f"{p.parent.name}/{p.name}" for p in captures()}
    for version in ("0.5.9", "0.5.23"):
        for name in ("invalid-choice", "unrecognized-arg", "ambiguous-prefix", "nsa-backend", "dsa-backend"):
            assert f"{version}/{name}.txt" in names


@pytest.mark.parametrize("path", captures(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_check_argv_predicts_every_capture(path: Path) -> None:
    argv, exit_code, output = read_capture(path)
    g = grammar(path.parent.name)
    error_lines = [line for line in output.splitlines() if line.startswith(f"{g.prog}: error: ")]
    predicted = check_argv(g, argv)
    if exit_code == 2:
        assert predicted is not None and [predicted.message] == error_lines
        assert parse_argparse_error(output) == predicted
    else:
        assert predicted is None and not error_lines
        assert parse_argparse_error(output) is None


def test_error_fields() -> None:
    old, new = grammar("0.5.9"), grammar("0.5.23")
    assert check_argv(new, [*MODEL, "--attention-backend", "x"]) == ArgvError(
        check_argv(new, [*MODEL, "--attention-backend", "x"]).message,  # type: ignore[union-attr]
        "invalid_choice",
        "--attention-backend",
        "x",
    )
    missing = check_argv(new, [*MODEL, "--tp-size"])
    assert missing == ArgvError(
        "sglang serve: error: argument --tp-size/--tensor-parallel-size: expected one argument",
        "missing_value",
        "--tp-size",
    )
    required = check_argv(old, ["--tp-size", "2"])
    assert required is not None and required.kind == "required" and required.flag == "--model-path"
    # CPython 3.11 names an action by all its option strings.
    assert required.message == "launch_server.py: error: the following arguments are required: --model-path/--model"
    unknown = check_argv(new, [*MODEL, "--no-such-flag", "1"])
    assert unknown is not None and (unknown.kind, unknown.flag) == ("unrecognized", "--no-such-flag")


@pytest.mark.parametrize(
    ("version", "argv"),
    [
        ("0.5.9", ["--nsa-dec", "fa3"]),  # unique prefix
        ("0.5.9", ["--nsa-decode-backend=fa3", "--tp=2"]),
        ("0.5.23", ["--dsa-decode-backend", "fa3", "--tp", "8", "--attention-backend=nsa"]),
        ("0.5.23", ["--enable-tf32-matmul", "--no-enable-tf32-matmul"]),
        ("0.5.23", ["--lora-target-modules", "q_proj", "all", "--lora-paths"]),
        ("0.5.23", ["--model-checksum", "--mem-fraction-static", "-0.5"]),
        ("0.5.23", ["--attention-backend=--"]),  # 3.11 drops the `--` before checking the choice
        ("0.5.23", ["--help", "--bogus"]),  # argparse prints help and exits before it looks at extras
    ],
)
def test_accepted(version: str, argv: list[str]) -> None:
    assert check_argv(grammar(version), [*MODEL, *argv]) is None


@pytest.mark.parametrize(
    ("version", "argv", "text"),
    [
        ("0.5.23", ["--nsa-dec", "fa3"], "unrecognized arguments: --nsa-dec fa3"),
        ("0.5.23", ["--trust-remote-code=1"], "argument --trust-remote-code: ignored explicit argument '1'"),
        ("0.5.23", ["--log-requests-target"], "argument --log-requests-target: expected at least one argument"),
        ("0.5.23", ["--tp-size", "--port", "1"], "argument --tp-size/--tensor-parallel-size: expected one argument"),
        ("0.5.23", ["--cuda-graph-bs=1"], "ambiguous option: --cuda-graph-bs=1 could match --cuda-graph-bs-decode, "),
        ("0.5.23", ["--port", "1", "--", "x"], "unrecognized arguments: -- x"),
        ("0.5.23", ["--lora-target-modules", "q_proj", "nope"], "invalid choice: 'nope' (choose from 'q_proj',"),
        # argparse classifies every string before it takes any: the ambiguity wins over the earlier bad choice.
        ("0.5.23", ["--kv-cache-dtype", "x", "--cuda-graph-max-bs", "8"], "ambiguous option: --cuda-graph-max-bs "),
        # ...but a bad choice wins over unknown arguments, which are only reported at the end.
        ("0.5.9", ["--dsa-decode-backend", "x", "--attention-backend", "dsa"], "invalid choice: 'dsa'"),
    ],
)
def test_rejected(version: str, argv: list[str], text: str) -> None:
    error = check_argv(grammar(version), [*MODEL, *argv])
    assert error is not None and text in error.message


def test_parse_argparse_error_accepts_newer_cpython_wording() -> None:
    output = (
        "usage: sglang serve [-h] --model-path MODEL_PATH\n"
        "sglang serve: error: argument --attention-backend: invalid choice: 'x' (choose from triton, fa3)\n"
    )
    assert parse_argparse_error(output) == ArgvError(
        output.splitlines()[1], "invalid_choice", "--attention-backend", "x"
    )
    coloured = output.replace("sglang serve: error:", "\x1b[1;31msglang serve: error:\x1b[0m")
    assert parse_argparse_error(coloured) is not None


@pytest.mark.parametrize(
    ("message", "kind", "flag", "value"),
    [
        (
            "unrecognized arguments: --nsa-decode-backend fa3",
            "unrecognized",
            "--nsa-decode-backend",
            "--nsa-decode-backend fa3",
        ),
        ("ambiguous option: --cuda-graph-bs=4 could match --a, --b", "ambiguous", "--cuda-graph-bs", "4"),
        ("argument --tp-size/--tensor-parallel-size: expected one argument", "missing_value", "--tp-size", None),
        ("the following arguments are required: --model-path/--model", "required", "--model-path", None),
        ("argument --tp-size/--tensor-parallel-size: invalid int value: 'x'", "other", "--tp-size", None),
        ("something else entirely", "other", None, None),
    ],
)
def test_parse_argparse_error_kinds(message: str, kind: str, flag: str | None, value: str | None) -> None:
    error = parse_argparse_error(f"usage: launch_server.py [-h] --model-path M\nlaunch_server.py: error: {message}\n")
    assert error == ArgvError(f"launch_server.py: error: {message}", kind, flag, value)  # type: ignore[arg-type]


def test_parse_argparse_error_needs_usage_and_error() -> None:
    assert parse_argparse_error("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA) is available.") is None
    assert parse_argparse_error("usage: sglang serve [-h] --model-path M\nall good\n") is None
    real = (SGLANG_CAPTURES / "0.5.23" / "dsa-backend.txt").read_text()
    assert parse_argparse_error(real) is None


def test_translate_dsa_to_old_release() -> None:
    flags: dict[str, FlagValue] = {
        "model-path": "/m",
        "dsa-decode-backend": "flashmla_sparse",
        "attention-backend": "dsa",
        "tp-size": 8,
    }
    old = translate_cell(grammar("0.5.9"), flags)
    assert old.ok, old.problems
    assert old.argv == [
        *MODEL,
        "--nsa-decode-backend",
        "flashmla_sparse",
        "--attention-backend",
        "nsa",
        "--tp-size",
        "8",
    ]
    assert old.renamed == {"dsa-decode-backend": "--nsa-decode-backend"}
    assert old.renamed_values == {"attention-backend": "nsa"}
    new = translate_cell(grammar("0.5.23"), flags)
    assert new.ok and new.renamed == {} and new.renamed_values == {}
    assert new.argv == [
        *MODEL,
        "--dsa-decode-backend",
        "flashmla_sparse",
        "--attention-backend",
        "dsa",
        "--tp-size",
        "8",
    ]


def test_translate_nsa_to_new_release() -> None:
    flags: dict[str, FlagValue] = {
        "model-path": "/m",
        "nsa-prefill-backend": "tilelang",
        "decode-attention-backend": "nsa",
    }
    new = translate_cell(grammar("0.5.23"), flags)
    assert new.ok, new.problems
    assert new.argv == [*MODEL, "--dsa-prefill-backend", "tilelang", "--decode-attention-backend", "dsa"]
    assert new.renamed_values == {"decode-attention-backend": "dsa"}


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("kv-cache-dtype", "fp4_e2m1", "kv-cache-dtype fp4_e2m1 is not a choice in sglang 0.5.23; choices: auto, "),
        ("attention-backend", "cutlass_mla", "argument --attention-backend: invalid choice: 'cutlass_mla'"),
        ("quantization", "qoq", "quantization qoq is not a choice in sglang 0.5.23"),
    ],
)
def test_translate_removed_choices(flag: str, value: str, expected: str) -> None:
    assert translate_cell(grammar("0.5.9"), {"model-path": "/m", flag: value}).ok
    result = translate_cell(grammar("0.5.23"), {"model-path": "/m", flag: value})
    assert not result.ok and len(result.problems) == 1 and expected in result.problems[0]
    assert "sglang serve: error: argument" in result.problems[0]


def test_translate_unknown_flags_suggest_close_names() -> None:
    result = translate_cell(
        grammar("0.5.23"), {"model-path": "/m", "enable-nan-detection": True, "atention-backend": "fa3"}
    )
    assert not result.ok
    nan, typo = result.problems
    assert nan.startswith("--enable-nan-detection does not exist in sglang 0.5.23")
    assert "unrecognized arguments: --enable-nan-detection" in nan
    assert "did you mean --attention-backend" in typo
    split = translate_cell(grammar("0.5.23"), {"model-path": "/m", "cuda-graph-max-bs": 8})
    assert "ambiguous option: --cuda-graph-max-bs could match" in split.problems[0]
    assert translate_cell(grammar("0.5.9"), {"model-path": "/m", "cuda-graph-max-bs": 8}).ok


def test_translate_values_and_bare_flags() -> None:
    g = grammar("0.5.23")
    result = translate_cell(
        g,
        {
            "model-path": "/m",
            "trust-remote-code": True,
            "enable-metrics": False,
            "skip-server-warmup": None,
            "mem-fraction-static": 0.8,
            "lora-target-modules": ["q_proj", "v_proj"],
            "model-checksum": True,
            "json-model-override-args": "-x",
        },
    )
    assert result.ok, result.problems
    assert result.argv == [
        *MODEL,
        "--trust-remote-code",
        "--mem-fraction-static",
        "0.8",
        "--lora-target-modules",
        "q_proj",
        "v_proj",
        "--model-checksum",
        "--json-model-override-args=-x",
    ]
    assert check_argv(g, result.argv) is None
    assert translate_cell(g, {"model-path": "/m", "tp": 2}).renamed == {"tp": "--tp-size"}


def test_translate_rejects_wrong_value_shapes() -> None:
    g = grammar("0.5.23")
    result = translate_cell(g, {"model-path": "/m", "trust-remote-code": "yes", "tp-size": True, "port": [1, 2]})
    assert not result.ok
    bare, needs, many = result.problems
    assert bare.startswith("--trust-remote-code takes no value") and "unrecognized arguments: yes" in bare
    assert needs.startswith("--tp-size needs a value") and "expected one argument" in needs
    assert "unrecognized arguments: 2" in many


def test_translate_reports_missing_required_unless_asked_not_to() -> None:
    g = grammar("0.5.9")
    result = translate_cell(g, {"attention-backend": "fa3"})
    assert not result.ok
    assert re.search(
        r"argparse says: launch_server.py: error: the following arguments are required", result.problems[0]
    )
    assert translate_cell(g, {"attention-backend": "fa3"}, check_required=False).ok
