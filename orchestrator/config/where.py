"""Where in a matrix file the flag an invalid cell's reason names was written: the line a user edits.

A reason comes from the SGLang grammar or argparse (`--enable-dp-attenton does not exist`, `attention-backend
flashinfr is not a choice`, `argument --tp-size/...: invalid int value`); it names the cell's flag, never the
file. The flag is looked up in the parsed document: an axis item holding the cell's value, else the key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.config.yamlpos import LoadedYaml, YamlPath
from orchestrator.matrix.flags import canonical_name, canonical_value, spellings
from orchestrator.model import Cell, FlagValue


@dataclass(frozen=True)
class FlagPlace:
    """One flag of a cell, as the file spells it, and the line to edit."""

    flag: str
    value: FlagValue
    line: int


def named_flag(cell: Cell, problem: str) -> str | None:
    """The cell's flag a problem names first (`--name` or `name`), canonical; None if it names none.

    The first one, because a reason may go on to suggest another flag (`did you mean --x?`).
    """
    found: list[tuple[int, str]] = []
    for name in cell.flags:
        for spelt in spellings(name):  # a host of another release names it in its own spelling
            hit = re.search(rf"(?<![\w-])(?:--)?{re.escape(spelt)}(?![\w-])", problem)
            if hit:
                found.append((hit.start(), name))
    return min(found)[1] if found else None


def _same(name: str, given: Any, value: FlagValue) -> bool:
    if isinstance(given, (dict, list)) or given is None:
        return False
    return canonical_value(name, given) == value or str(given) == str(value)


def place_of(doc: LoadedYaml, cell: Cell, flag: str) -> FlagPlace | None:
    """Where `flag` (canonical) of `cell` is written: the axis item with its value, else the first key."""
    value = cell.flags.get(flag)
    if value is None:
        return None
    data = doc.data if isinstance(doc.data, dict) else {}
    keys = [p for p in doc.lines if p[:1] in (("flags",), ("matrix",)) and p[1:2] != ("exclude",) and _spells(p, flag)]
    for path in sorted(keys, key=lambda p: (p[0] != "matrix", len(p), doc.lines[p])):
        if path[0] == "matrix" and len(path) == 2:
            items = _at(data, path)
            for index, given in enumerate(items if isinstance(items, list) else []):
                line = doc.line_of((*path, index))
                if line is not None and _same(flag, given, value):
                    return FlagPlace(str(path[-1]), given, line)
        return FlagPlace(str(path[-1]), value, doc.lines[path])
    return None


def _spells(path: YamlPath, flag: str) -> bool:
    last = path[-1]
    return isinstance(last, str) and canonical_name(last) == flag


def _at(data: Any, path: YamlPath) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def problem_places(doc: LoadedYaml, cell: Cell, problems: tuple[str, ...]) -> list[FlagPlace]:
    """The place of the flag each problem names, in the problems' order, each once."""
    places: list[FlagPlace] = []
    for problem in problems:
        flag = named_flag(cell, problem)
        place = place_of(doc, cell, flag) if flag else None
        if place is not None and place not in places:
            places.append(place)
    return places


def where_lines(file: str, places: list[list[FlagPlace]]) -> list[str]:
    """`FILE:LINE: flag: values: N invalid cells (reason above)`, once per place the invalid cells point at."""
    cells: dict[tuple[str, int], int] = {}
    values: dict[tuple[str, int], list[str]] = {}
    for place in places:
        for found in place:
            key = (found.flag, found.line)
            cells[key] = cells.get(key, 0) + 1
            shown = json.dumps(found.value) if isinstance(found.value, bool) else str(found.value)
            values.setdefault(key, [])
            values[key] += [shown] if shown not in values[key] else []
    return [
        f"{file}:{line}: {flag}: {', '.join(values[flag, line])}: {count} invalid cell{'s' * (count > 1)} "
        "(reason above)"
        for (flag, line), count in cells.items()
    ]
