"""Flags whose value is a secret (`--api-key`): a clear-text value is turned into a secret, with a warning.

The value then travels as a `SecretRef` holding it in memory: over the launch channel's stdin, never
in `cmd.sh`, the store or a report. Writing `api-key: {secret: ORCH_API_KEY}` keeps it out of the
matrix file too, and lets `repro` and `--resume` read it again from the environment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from orchestrator.config.diagnostics import error_at
from orchestrator.config.yamlpos import LoadedYaml
from orchestrator.errors import ConfigError
from orchestrator.model import AxisValue, FlagValue
from orchestrator.secret import MASK, MIN_MASKED_VALUE, is_secret_name, protect, var_for_flag

log = logging.getLogger("orchestrator")


def protect_flags(flags: Mapping[str, FlagValue], where: Callable[[str], str]) -> dict[str, FlagValue]:
    """Every flag of a set, clear-text secrets turned into SecretRefs; `where(name)` says where each was given."""
    return {name: protect(name, value, where(name)) for name, value in flags.items()}


def protect_entry(entry: Mapping[str, AxisValue], where: Callable[[str], str]) -> dict[str, AxisValue]:
    """An axis value or include entry, each flag of a bundle protected as a flag given alone would be."""
    return {
        name: protect_flags(value, where) if isinstance(value, dict) else protect(name, value, where(name))
        for name, value in entry.items()
    }


# The matrix text as stored: each secret written in it replaced by its reference, from the parsed document.
# A regular expression over the text cannot see what YAML makes of `!!str`, an anchor, a folded scalar or
# an escaped quote; the node tree's marks say exactly which characters spell each value, however written.
_KEPT_TAGS = frozenset({"tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"})


def _is_reference(node: yaml.Node) -> bool:
    """`{secret: VAR}`: a variable's name, which reveals nothing."""
    return (
        isinstance(node, yaml.MappingNode)
        and len(node.value) == 1
        and isinstance(node.value[0][0], yaml.ScalarNode)
        and node.value[0][0].value == "secret"
        and isinstance(node.value[0][1], yaml.ScalarNode)
    )


def secret_scalars(root: yaml.Node | None) -> dict[int, tuple[yaml.ScalarNode, str]]:
    """id -> (node, name) of every scalar that is, or is inside, the value of a secret-named key.

    The rule of secret.is_secret_name, applied wherever the key stands (flags, axes, bundles, include,
    env): the loader turns such flags into secrets and masks such variables, so the text holds them in
    clear nowhere. A bare flag (true), null, an empty value and a `{secret: VAR}` reference reveal nothing.
    """
    found: dict[int, tuple[yaml.ScalarNode, str]] = {}
    seen: set[tuple[int, str | None]] = set()
    stack: list[tuple[yaml.Node, str | None]] = [(root, None)] if root is not None else []
    while stack:  # not recursive: aliases may nest a small file deeply
        node, secret = stack.pop()
        if (id(node), secret) in seen:
            continue
        seen.add((id(node), secret))
        if isinstance(node, yaml.ScalarNode):
            if secret is not None and node.tag not in _KEPT_TAGS and node.value != "":
                found[id(node)] = (node, secret)
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, secret) for item in node.value]
        elif isinstance(node, yaml.MappingNode) and not (secret is not None and _is_reference(node)):
            for key, value in node.value:
                named = isinstance(key, yaml.ScalarNode) and is_secret_name(str(key.value))
                stack.append((value, str(key.value) if named else secret))
    return found


def masked_text(doc: LoadedYaml) -> str:
    """The document's text with every secret it spells replaced by `{secret: VAR}` (VAR as the loader names it).

    Each secret scalar's characters (its anchor kept, its tag dropped) become the reference, padded with
    the newlines it spanned so that every other line keeps its number; then any other appearance of a
    secret value (a comment, a second key) becomes `***`. The result reads back as the same matrix,
    secrets then read from the environment.
    """
    secrets = sorted(secret_scalars(doc.node).values(), key=lambda found: found[0].start_mark.index)
    if not secrets:
        return doc.text
    values = sorted({n.value for n, _ in secrets if len(n.value) >= MIN_MASKED_VALUE}, key=len, reverse=True)
    parts: list[str] = []
    done = 0
    for node, name in secrets:
        start, end = node.start_mark.index, node.end_mark.index
        anchor = doc.anchor_of.get(id(node))
        reference = (f"&{anchor} " if anchor else "") + f"{{secret: {var_for_flag(name)}}}"
        parts += [_mask_values(doc.text[done:start], values), reference + "\n" * doc.text.count("\n", start, end)]
        done = end
    parts.append(_mask_values(doc.text[done:], values))
    return "".join(parts)


def _mask_values(text: str, values: list[str]) -> str:
    for value in values:
        text = text.replace(value, MASK)
    return text


def _clear(value: object) -> bool:
    """Whether a raw YAML value spells a secret in clear (not a reference, a bare flag, null or empty)."""
    if isinstance(value, dict):
        return set(value) != {"secret"}
    return value is not None and not isinstance(value, bool) and value != ""


def secret_errors(doc: LoadedYaml) -> list[ConfigError]:
    """Secrets where the loader cannot keep them secret: in clear as an axis value, or as a list of values.

    An axis value is part of its cell's id and label, and a secret's text is its reference: two keys would
    be one cell (and a sweep of duplicate ids). A list would reach the command line value by value.
    """
    data: dict[Any, Any] = doc.data if isinstance(doc.data, dict) else {}
    section: dict[Any, Any] = data["matrix"] if isinstance(data.get("matrix"), dict) else {}
    errors: list[ConfigError] = []
    for name, values in section.items():
        if name in ("include", "exclude") or not isinstance(values, list):
            continue
        for index, value in enumerate(values):
            members = value.items() if isinstance(value, dict) and set(value) != {"secret"} else [(name, value)]
            for flag, item in members:
                if is_secret_name(str(flag)) and _clear(item):
                    errors.append(_axis_secret(doc, ("matrix", name, index), str(flag)))
    places: list[tuple[tuple[str | int, ...], object]] = [(("flags",), data.get("flags"))]
    places += [(("matrix", "include", i), e) for i, e in enumerate(_list(section.get("include")))]
    for path, flags in places:
        for flag, value in flags.items() if isinstance(flags, dict) else ():
            if is_secret_name(str(flag)) and isinstance(value, list):
                var = var_for_flag(str(flag))
                message = f"--{flag} is a secret, given as a list of values; a secret is passed as one value"
                fix = f"write `{flag}: {{secret: {var}}}` and export {var}"
                errors.append(error_at(doc, (*path, flag), message, fix))
    return errors


def _axis_secret(doc: LoadedYaml, path: tuple[str | int, ...], flag: str) -> ConfigError:
    var = var_for_flag(flag)
    message = (
        f"--{flag} is a secret, given in clear text as a value of axis {path[1]!r}: every cell would show it as "
        f"{{secret: {var}}}, so cells differing only in it would have one id"
    )
    fix = f"set it once as a plain flag, `flags: {{{flag}: {{secret: {var}}}}}` (export {var}), not as an axis value"
    return error_at(doc, path, message, fix)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
