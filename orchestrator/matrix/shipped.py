"""The SGLang flag grammars that ship with the tool: what `validate` checks a matrix against without a host.

They are generated from the real `--help` of each pinned release (matrix/gen_grammars.py) into the package
data the simulated host reads too (orchestrator/sim/grammars/<version>.json): one copy of SGLang's facts.
Read here as data, never imported: the simulator shares no code with the tool.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from orchestrator.matrix.grammar import FlagGrammar

GRAMMARS_DIR = Path(__file__).resolve().parents[1] / "sim" / "grammars"


def version_key(version: str) -> tuple[int, ...]:
    """`0.5.23` -> (0, 5, 23): releases in the order they came out (not as text, where 0.5.9 > 0.5.23)."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def shipped_versions(folder: Path = GRAMMARS_DIR) -> list[str]:
    """The releases whose grammar ships with the tool, newest first."""
    return sorted((p.stem for p in folder.glob("*.json")), key=version_key, reverse=True)


@cache
def shipped_grammar(version: str, folder: Path = GRAMMARS_DIR) -> FlagGrammar:
    """One shipped release's grammar."""
    return FlagGrammar.from_json((folder / f"{version}.json").read_text(encoding="utf-8"))
