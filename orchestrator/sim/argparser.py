"""The simulated launcher's command line: a real argparse parser built from a release's flag grammar.

Being argparse itself (with the release's prog and `allow_abbrev=True`), it rejects exactly what the
release rejects, with the same usage line, `prog: error: ...` message and exit code 2.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.matrix.grammar import FlagGrammar, FlagSpec
from orchestrator.matrix.valuetypes import value_type
from orchestrator.sim.errors import ConfigError

GRAMMARS_ENV = "ORCH_SIM_GRAMMARS"
GRAMMARS_DIR = Path(__file__).resolve().parent / "grammars"



def grammar_dir() -> Path:
    """Where `<version>.json` grammars are read from: ORCH_SIM_GRAMMARS, else the package's grammars/."""
    override = os.environ.get(GRAMMARS_ENV)
    return Path(override) if override else GRAMMARS_DIR


def load_grammar(version: str) -> FlagGrammar:
    """The flag grammar of one SGLang release; ConfigError naming the known versions if there is none."""
    path = grammar_dir() / f"{version}.json"
    try:
        return FlagGrammar.from_json(path.read_text())
    except FileNotFoundError:
        known = sorted(p.stem for p in grammar_dir().glob("*.json"))
        raise ConfigError(
            f"no flag grammar for SGLang {version} ({path} is missing)",
            fix=f"use one of: {', '.join(known) or 'none installed'}",
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unreadable flag grammar {path}: {exc}") from None


def build_parser(grammar: FlagGrammar) -> argparse.ArgumentParser:
    """An argparse parser accepting exactly the grammar's options, spellings and choices."""
    parser = argparse.ArgumentParser(prog=grammar.prog, allow_abbrev=True)
    seen: set[str] = set()
    for spec in options(grammar):
        names = [n for n in _option_names(spec) if n not in seen]
        if not names:
            continue
        seen.update(spec.names)
        parser.add_argument(*names, **_add_argument_kwargs(spec))
    return parser


def given_flags(grammar: FlagGrammar, namespace: argparse.Namespace) -> dict[str, str]:
    """The flags a launch set, by canonical name, as canonical strings (`true`/`false` for switches)."""
    given: dict[str, str] = {}
    for spec in options(grammar):
        value = getattr(namespace, spec.dest, None)
        if value is None or (value is False and not spec.negatable):
            continue
        name = canonical_name(spec.primary)
        if isinstance(value, bool):
            given[name] = "true" if value else "false"
        elif isinstance(value, list):
            given[name] = " ".join(str(v) for v in value)
        else:
            given[name] = str(canonical_value(name, str(value)))
    return given


def raw_values(grammar: FlagGrammar, namespace: argparse.Namespace) -> dict[str, Any]:
    """Every option's parsed value by argparse dest, in grammar order (what `server_args=` prints)."""
    return {spec.dest: getattr(namespace, spec.dest, None) for spec in options(grammar)}


def options(grammar: FlagGrammar) -> list[FlagSpec]:
    """The grammar's options except --help, which argparse provides itself."""
    return [spec for spec in grammar.flags if not {"-h", "--help"} & set(spec.names)]


def _option_names(spec: FlagSpec) -> list[str]:
    if not spec.negatable:
        return list(spec.names)
    # BooleanOptionalAction adds each `--no-x` itself.
    return [n for n in spec.names if not (n.startswith("--no-") and f"--{n[5:]}" in spec.names)]


def _add_argument_kwargs(spec: FlagSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dest": spec.dest}
    if spec.required:
        kwargs["required"] = True
    if not spec.takes_value:
        kwargs["action"] = argparse.BooleanOptionalAction if spec.negatable else "store_true"
        return kwargs
    if spec.nargs is not None:
        kwargs["nargs"] = spec.nargs
    if spec.choices is not None:
        kwargs["choices"] = list(spec.choices)
    elif (kind := value_type(spec)) is not None:
        kwargs["type"] = kind
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    return kwargs
