"""The simulated host's flag grammar: which long options one SGLang release accepts, with their choices.

The simulator's own copy of the format of its grammar files (sim/grammars/<version>.json, made from the
releases' real `--help` by scripts/gen_grammars), so that it shares no code with the tool it is used to
test: the tool reads the simulated host's `--help` text with its own parser, as it reads a real one's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FlagSpec:
    """One option of the launcher: all its spellings, whether it takes a value, its choices."""

    names: tuple[str, ...]
    """Every long spelling, primary first, with dashes: ("--tp-size", "--tensor-parallel-size")."""
    takes_value: bool
    nargs: str | None = None
    """None for exactly one value; "?", "*" or "+" as argparse has it."""
    choices: tuple[str, ...] | None = None
    required: bool = False
    negatable: bool = False
    """`--x | --no-x` (argparse.BooleanOptionalAction): `names` then also holds `--no-x`."""
    metavar: str | None = None

    @property
    def primary(self) -> str:
        """The first spelling, as the help lists it."""
        return self.names[0]

    @property
    def dest(self) -> str:
        """argparse's destination name."""
        return self.primary.lstrip("-").replace("-", "_")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "names": list(self.names),
            "takes_value": self.takes_value,
            "nargs": self.nargs,
            "choices": list(self.choices) if self.choices is not None else None,
            "required": self.required,
            "negatable": self.negatable,
            "metavar": self.metavar,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FlagSpec:
        """Rebuild from `to_dict` output."""
        choices = data.get("choices")
        return cls(
            names=tuple(data["names"]),
            takes_value=bool(data["takes_value"]),
            nargs=data.get("nargs"),
            choices=tuple(choices) if choices is not None else None,
            required=bool(data.get("required", False)),
            negatable=bool(data.get("negatable", False)),
            metavar=data.get("metavar"),
        )


@dataclass(frozen=True)
class FlagGrammar:
    """All options of one SGLang release's launcher, and the program name its errors carry."""

    version: str
    prog: str
    """`launch_server.py` (0.5.9) or `sglang serve` (0.5.23): argparse errors start with it."""
    flags: tuple[FlagSpec, ...]
    _by_name: dict[str, FlagSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        index = self._by_name
        for spec in self.flags:
            for name in spec.names:
                index[name] = spec

    def lookup(self, name: str) -> FlagSpec | None:
        """The option spelled exactly `name` (with dashes), or None."""
        return self._by_name.get(name if name.startswith("--") else f"--{name}")

    def names(self) -> list[str]:
        """Every long spelling the launcher accepts."""
        return list(self._by_name)

    def to_json(self) -> str:
        """Serialise for sim/grammars/<version>.json."""
        payload = {"version": self.version, "prog": self.prog, "flags": [f.to_dict() for f in self.flags]}
        return json.dumps(payload, indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> FlagGrammar:
        """Rebuild from `to_json` output."""
        data = json.loads(text)
        return cls(
            version=data["version"],
            prog=data["prog"],
            flags=tuple(FlagSpec.from_dict(f) for f in data["flags"]),
        )
