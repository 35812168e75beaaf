"""YAML loading that remembers the line of every mapping key and sequence item.

Validation errors must name the line to fix, and plain `yaml.safe_load` forgets where
things were. The loader also reads booleans the YAML 1.2 way (only true/false), because
YAML 1.1's `on`/`off`/`yes`/`no` would silently turn flag values like `off` into False.
"""

from __future__ import annotations

import os
import re
import stat
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
        self.anchor_of: dict[int, str] = {}
        """id(node) -> the anchor it was given (`&name`), to keep when its text is rewritten."""
        self._recorded: set[int] = set()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """The node, its anchor noted: a node's marks span its anchor, and rewriting them must not drop it."""
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = None if isinstance(event, yaml.AliasEvent) else getattr(event, "anchor", None)
        node = super().compose_node(parent, index)
        if anchor and node is not None:
            self.anchor_of[id(node)] = anchor
        return node

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
    node: yaml.Node | None = None
    """The document's node tree: every value's marks in `text`, for rewriting one without touching the rest."""
    anchor_of: Mapping[int, str] = field(default_factory=dict)

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
            fix="indent with spaces: YAML does not allow a tab there"
            if "'\\t'" in problem
            else "check the indentation, the quoting and the `key: value` spacing near this line",
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
    return LoadedYaml(data=data, text=text, file=file, lines=loader.lines, node=node, anchor_of=loader.anchor_of)


MAX_YAML_BYTES = 4 * 1024 * 1024
"""The largest configuration file read: a matrix of thousands of cells is a few hundred KB."""


def read_capped(path: str | Path, limit: int = MAX_YAML_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else raises ConfigError without reading on.

    `/dev/zero` or a FIFO given by mistake would otherwise be read until memory runs out (or forever).
    """
    file = str(path)
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer; a regular file reads as ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            mode = os.fstat(fd).st_mode
            data = bytearray()
            while stat.S_ISREG(mode) and len(data) <= limit:
                chunk = os.read(fd, 1 << 16)  # small reads: os.read allocates what it is asked for
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc}", file=file, fix="check the path and its permissions") from exc
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a device, a pipe or a socket)"
        raise ConfigError(f"{what}, so it is not read", file=file, fix="pass the path of the YAML file itself")
    if len(data) > limit:
        raise ConfigError(
            f"the file is larger than {limit // (1024 * 1024)} MiB, the most a configuration file may hold",
            file=file,
            fix="check that this is the right file; a matrix of thousands of cells takes a few hundred KB",
        )
    return bytes(data)


def load_yaml(path: str | Path) -> LoadedYaml:
    """Read and parse a YAML file, keeping positions; unreadable, huge or non-regular files raise ConfigError."""
    file = str(path)
    data = read_capped(path)
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
