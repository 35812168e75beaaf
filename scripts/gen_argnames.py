"""Write orchestrator/knowledge/argnames.py: every server argument name the tool knows, from the captured sources.

Usage: scripts/gen_argnames [--check] [--vllm-wheel WHEEL ...]

The names come from three places, none of them kept by hand:
- every `--help` capture of an SGLang release in ../shared/fixtures/sglang/<version>/: flags.json (each flag and
  its aliases) and help.txt (every whole `--name` the text holds, prose mentions included: help.txt wraps its
  lines, so a name cut at a line end is no name and is left out);
- the simulator's grammars (orchestrator/sim/grammars/*.json, generated from those captures by gen_grammars);
- orchestrator/knowledge/data/vllm_engine_args.txt: vLLM's argument names, extracted from released vLLM wheels
  by `--vllm-wheel` (the file's header names each wheel and its sha256, so the capture can be checked again).

`--check` writes nothing and exits 1 when the committed argnames.py is not what the sources give now.
`--vllm-wheel WHEEL ...` rewrites the vLLM data file from those wheels (`pip download --no-deps --only-binary
:all: vllm==VERSION`), then argnames.py from it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAPTURES = REPO.parent / "shared" / "fixtures" / "sglang"
GRAMMARS = REPO / "orchestrator" / "sim" / "grammars"
VLLM_DATA = REPO / "orchestrator" / "knowledge" / "data" / "vllm_engine_args.txt"
OUT = REPO / "orchestrator" / "knowledge" / "argnames.py"
COMMAND = "scripts/gen_argnames"

_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
"""A name of two words or more, in the spelling `orchestrator.knowledge.vocabulary` looks names up in."""
_HELP_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?![\w-])")
"""A whole `--name` in help text; `--kv-` cut by a line wrap and `--cuda-graph-*` match nothing."""
_VERSION = re.compile(r"\d+(?:\.\d+)+\S*")
_WHEEL = re.compile(r"vllm-(?P<version>\d+(?:\.\d+)+[^-]*)-.*\.whl")
VLLM_DATACLASSES = ("EngineArgs", "AsyncEngineArgs", "BaseFrontendArgs", "FrontendArgs")
"""vLLM's dataclasses whose fields become `--help` options (`max_model_len` is `--max-model-len`)."""
VLLM_SOURCES = (
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",  # FrontendArgs and `vllm serve`'s own options up to 0.2x
    "vllm/entrypoints/common/cli_args.py",  # the same, where later releases moved them
)


def underscored(flag: str) -> str:
    """`--max-model-len` -> `max_model_len`."""
    return flag.lstrip("-").replace("-", "_")


def kept(names: Iterable[str]) -> set[str]:
    """Only names of two words or more: one word (`model`, `device`, `seed`) is an ordinary word in any message."""
    return {name for name in names if _NAME.fullmatch(name)}


def capture_names(captures: Path = CAPTURES) -> set[str]:
    """Every flag and alias of every SGLang capture's flags.json, and every whole `--name` in its help.txt."""
    names: set[str] = set()
    for flags in sorted(captures.glob("*/flags.json")):
        for name, spec in json.loads(flags.read_text(encoding="utf-8")).items():
            names.update(underscored(flag) for flag in (name, *(spec.get("aliases") or [])))
    for help_txt in sorted(captures.glob("*/help.txt")):
        names.update(underscored(m.group(1)) for m in _HELP_FLAG.finditer(help_txt.read_text(encoding="utf-8")))
    return names


def grammar_names(grammars: Path = GRAMMARS) -> set[str]:
    """Every spelling of every flag of the simulator's grammars."""
    return {
        underscored(flag)
        for path in sorted(grammars.glob("*.json"))
        for spec in json.loads(path.read_text(encoding="utf-8"))["flags"]
        for flag in spec["names"]
    }


def vllm_source_names(source: str) -> set[str]:
    """vLLM's argument names in one source file: the public fields of its argument dataclasses, and every `--name`
    given to `add_argument` (the options `--help` lists that no dataclass field holds, such as
    `--api-server-count`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name in VLLM_DATACLASSES:
            names.update(
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and not stmt.target.id.startswith("_")  # private: set by vLLM itself, never a flag
            )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names.update(
                underscored(arg.value)
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
            )
    return names


def read_vllm_data(path: Path = VLLM_DATA) -> set[str]:
    """The names of the vLLM data file: the first word of each line that is not blank or a `#` comment."""
    names: set[str] = set()
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if not re.fullmatch(r"[a-z][a-z0-9_]*", words[0]) or not all(_VERSION.fullmatch(w) for w in words[1:]):
            raise SystemExit(
                f"{path}:{no}: {line.strip()!r} is not `name version...` (an underscore name, then the vLLM "
                f"releases that have it); fix the line or rewrite the file with `{COMMAND} --vllm-wheel WHEEL...`"
            )
        names.add(words[0])
    return names


def wheel_names(wheel: Path) -> tuple[str, str, set[str]]:
    """(release, sha256 of the wheel, argument names) of one vLLM wheel."""
    match = _WHEEL.fullmatch(wheel.name)
    if not match:
        raise SystemExit(f"{wheel}: not a vLLM wheel's file name (vllm-VERSION-...whl); give the file pip downloaded")
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        present = set(archive.namelist())
        if VLLM_SOURCES[0] not in present:
            raise SystemExit(f"{wheel}: has no {VLLM_SOURCES[0]}; give a vLLM wheel")
        for member in VLLM_SOURCES:
            if member in present:
                names |= vllm_source_names(archive.read(member).decode("utf-8"))
    return match.group("version"), hashlib.sha256(wheel.read_bytes()).hexdigest(), names


def render_vllm_data(releases: list[tuple[str, str, str, set[str]]]) -> str:
    """The vLLM data file for (release, wheel file name, sha256, names) of each wheel."""
    by_name: dict[str, list[str]] = {}
    for version, _, _, names in releases:
        for name in names:
            by_name.setdefault(name, []).append(version)
    head = [
        "# vLLM's server argument names, in the underscore spelling (`--max-model-len` is max_model_len): one name",
        "# a line, then the vLLM releases that have it. scripts/gen_argnames reads the first word of each line.",
        f"# Written by `{COMMAND} --vllm-wheel WHEEL...` from the released wheels below (from PyPI with",
        "# `pip download --no-deps --only-binary :all: vllm==VERSION`); do not edit by hand. In each wheel it reads",
        *(f"#   {source}" for source in VLLM_SOURCES),
        f"# (those present) and takes the public fields of the dataclasses {', '.join(VLLM_DATACLASSES)}",
        "# (vLLM's `--help` names each field `--` + the field with `_` -> `-`, a boolean also `--no-...`) and every",
        "# `--name` given to `add_argument` (options with no field, such as `vllm serve`'s --api-server-count).",
        "# Releases read:",
        *(f"#   vllm {version}: {wheel} sha256 {digest}" for version, wheel, digest, _ in releases),
    ]
    return "\n".join([*head, *(" ".join([name, *versions]) for name, versions in sorted(by_name.items()))]) + "\n"


def collect(captures: Path = CAPTURES, grammars: Path = GRAMMARS, vllm_data: Path = VLLM_DATA) -> set[str]:
    """Every name the generated module holds."""
    return kept(capture_names(captures) | grammar_names(grammars) | read_vllm_data(vllm_data))


DOCSTRING = "\n".join((
    '"""Every server argument name the tool knows, in the underscore spelling (`--max-model-len` is `max_model_len`).',
    "",
    f"Generated by `{COMMAND}` (scripts/gen_argnames.py): do not edit. The names come from the `--help` captures of",
    "each SGLang release in ../shared/fixtures/sglang/ (flags.json with aliases, help.txt), the simulator's grammars",
    "(orchestrator/sim/grammars/), and vLLM's argument names (orchestrator/knowledge/data/vllm_engine_args.txt, from",
    "vLLM's released wheels: `EngineArgs` fields and the `vllm serve` options), which vLLM's logs name when its config",
    "checks reject a value. Only names of two words or more are kept: `model`, `device` or `seed` alone are ordinary",
    "words in any message. tests/knowledge/test_argnames.py checks that this file is what the generator writes now.",
    '"""',
))


def render(names: Iterable[str], width: int = 120) -> str:
    """The module's text: the names sorted, packed into lines of at most `width` characters."""
    lines: list[str] = []
    line = ""
    for name in sorted(names):
        item = f'"{name}",'
        if line and len(line) + 1 + len(item) > width:
            lines.append(line)
            line = ""
        line = f"{line} {item}" if line else f"    {item}"
    if line:
        lines.append(line)
    body = "\n".join(lines)
    return f"{DOCSTRING}\n\nARGUMENT_NAMES: frozenset[str] = frozenset((\n{body}\n))\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write orchestrator/knowledge/argnames.py.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if argnames.py is stale")
    parser.add_argument("--vllm-wheel", nargs="+", type=Path, default=[], metavar="WHEEL",
                        help=f"rewrite {VLLM_DATA.relative_to(REPO)} from these vLLM wheels first")
    args = parser.parse_args(argv)
    if not CAPTURES.is_dir():
        parser.error(f"needs the SGLang --help captures at {CAPTURES} (the workspace's shared/ beside this checkout)")
    if args.vllm_wheel and args.check:
        parser.error("--check writes nothing; give --vllm-wheel without it")
    if args.vllm_wheel:
        releases = [(version, wheel.name, digest, names)
                    for wheel in args.vllm_wheel for version, digest, names in [wheel_names(wheel)]]
        VLLM_DATA.write_text(render_vllm_data(releases), encoding="utf-8")
        print(f"wrote {VLLM_DATA.relative_to(REPO)}")
    text = render(collect())
    current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if args.check:
        if current != text:
            print(f"stale: {OUT.relative_to(REPO)} (run {COMMAND})", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
