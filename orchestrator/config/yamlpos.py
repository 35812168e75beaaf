"""YAML loading that remembers the line of every mapping key and sequence item.

Validation errors must name the line to fix, and plain `yaml.safe_load` forgets where
things were. The loader also reads booleans the YAML 1.2 way (only true/false), because
YAML 1.1's `on`/`off`/`yes`/`no` would silently turn flag values like `off` into False.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ConfigError, ConfigErrors

YamlPath = tuple[str | int, ...]


class PositionLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans that records the node marks of a document."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.lines: dict[YamlPath, int] = {}
        self.duplicates: list[tuple[YamlPath, int, int]] = []
        self._recorded: set[int] = set()

    def record(self, node: yaml.Node, path: YamlPath) -> None:
        """Remember the line (1-based) of every key and item below `node` (before merge keys are flattened)."""
        # An alias is the anchored node itself: walk below it once. Walking every path through aliases
        # loops on recursive ones and takes exponential time on a "billion laughs" file; errors under a
        # later alias point at the alias instead.
        if id(node) in self._recorded:
            return
        self._recorded.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, (str, int)):
                    continue
                child = (*path, key)
                line = key_node.start_mark.line + 1
                if child in self.lines:
                    self.duplicates.append((child, self.lines[child], line))
                self.lines[child] = line
                self.record(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = (*path, index)
                self.lines[child] = item.start_mark.line + 1
                self.record(item, child)


PositionLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
PositionLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


@dataclass(frozen=True)
class LoadedYaml:
    """A parsed YAML document with the line of every key and item."""

    data: Any
    text: str
    file: str
    lines: Mapping[YamlPath, int] = field(default_factory=dict)

    def line_of(self, path: YamlPath) -> int | None:
        """The line of the key or item at `path` (1-based), or None when there is none."""
        return self.lines.get(tuple(path))

    def nearest_line(self, path: YamlPath) -> int:
        """The line of `path`, else of its closest ancestor that exists, else 1."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1


def parse_yaml(text: str, file: str) -> LoadedYaml:
    """Parse one YAML document; malformed YAML or duplicate keys raise ConfigError(s)."""
    try:
        loader = PositionLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character anywhere: the reader checks the whole text first
        raise ConfigError(
            f"malformed YAML: character {exc.character:#06x} is not allowed in a YAML file",
            file=file,
            line=text[: exc.position].count("\n") + 1,
            fix='remove it, or write it as an escape such as "\\x07" inside double quotes',
        ) from exc
    try:
        node = loader.get_single_node()
        if node is not None:
            loader.record(node, ())
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ": ".join(p for p in (exc.context, exc.problem) if p) or "malformed YAML"
        raise ConfigError(
            f"malformed YAML: {problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            fix="check the indentation, the quoting and the `key: value` spacing near this line",
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", file=file, fix="check the file's syntax") from exc
    finally:
        loader.dispose()
    if loader.duplicates:
        raise ConfigErrors(
            [
                ConfigError(
                    f"duplicate key {'.'.join(map(str, path))!r} (first given on line {first})",
                    file=file,
                    line=line,
                    fix="keep one of the two; YAML would silently drop the first",
                )
                for path, first, line in loader.duplicates
            ]
        )
    return LoadedYaml(data=data, text=text, file=file, lines=loader.lines)


def load_yaml(path: str | Path) -> LoadedYaml:
    """Read and parse a YAML file, keeping positions; unreadable files raise ConfigError."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc}", file=file, fix="check the path and its permissions") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text: byte {data[exc.start]:#04x} cannot be decoded",
            file=file,
            line=line,
            fix="save the file as UTF-8",
        ) from exc
    return parse_yaml(text, file)
