"""Checks of a matrix file that need more than one value at a time, run beside pydantic.

They read the raw YAML data defensively (a wrong shape is pydantic's error to report),
so that one pass reports every problem of the file. Flag names are compared in their
canonical spelling: `nsa-decode-backend` and `dsa-decode-backend` are one axis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from orchestrator.config.diagnostics import did_you_mean, dotted, error_at, unknown_key
from orchestrator.config.schema import ENV_NAME
from orchestrator.config.secret_flags import secret_errors
from orchestrator.config.yamlpos import LoadedYaml, YamlPath
from orchestrator.errors import ConfigError
from orchestrator.matrix.expand import normalized
from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.secret import MASK, is_secret_name
from orchestrator.settings import Deadlines

FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# A whole value that is a shell variable reference: what a user writes meaning "from my environment".
SHELL_REFERENCE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")
DEADLINE_NAMES = tuple(f.name for f in fields(Deadlines))


def as_mapping(value: object) -> dict[Any, Any]:
    """`value` if it is a mapping, else an empty one (shape errors are pydantic's to report)."""
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def flag_names(doc: LoadedYaml, path: YamlPath, names: Mapping[Any, Any]) -> list[ConfigError]:
    """Errors for keys that are not flag names, or that name one flag twice under two spellings."""
    errors: list[ConfigError] = []
    seen: dict[str, str] = {}
    for name in names:
        where = (*path, name)
        if not isinstance(name, str) or not FLAG_NAME.match(name):
            hint = str(name).strip().lstrip("-").replace("_", "-").lower() or "attention-backend"
            message = f"{name!r} in {dotted(path)} is not a flag name (lower case, digits and dashes)"
            errors.append(error_at(doc, where, message, f"write {hint!r}, without leading dashes"))
            continue
        canonical = canonical_name(name)
        if canonical in seen:
            message = f"{name!r} and {seen[canonical]!r} in {dotted(path)} are the same flag ({canonical})"
            errors.append(error_at(doc, where, message, "keep one of the two spellings"))
        seen.setdefault(canonical, name)
    return errors


def env_names(doc: LoadedYaml, path: YamlPath, env: Mapping[Any, Any]) -> list[ConfigError]:
    """Errors for environment variable names a shell would not accept."""
    return [
        error_at(doc, (*path, name), f"{name!r} is not an environment variable name", "use letters, digits and _")
        for name in env
        if not ENV_NAME.match(str(name))
    ]


def shell_references(doc: LoadedYaml, path: YamlPath, values: Mapping[Any, Any], kind: str) -> list[ConfigError]:
    """Errors for values written `$VAR` or `${VAR}`: every value reaches the remote shell quoted, so the
    launch would pass those characters (a token of `${HF...}` fails only at weight download, hours later).
    `kind` is `env` (names as written) or `flag` (named `--name`)."""
    errors: list[ConfigError] = []
    for name, value in values.items():
        found = SHELL_REFERENCE.match(value.strip()) if isinstance(value, str) else None
        if found is None:
            continue
        shown = f"--{name}" if kind == "flag" else f"env {name}"
        var, spelt = found.group(1) or found.group(2), repr(value.strip())
        # A secret's clear value may itself look like `$word` (a password); `${WORD}` is surely a reference.
        if is_secret_name(str(name)) and not found.group(1):
            var, spelt = "VAR", "written like a shell variable ($VAR)"
        message = f"{shown} is {spelt}, which is not expanded: the launch quotes every value"
        fix = f"write `{name}: {{secret: {var}}}` (read from your shell at launch, never stored), or the value itself"
        errors.append(error_at(doc, (*path, name), message, fix))
    return errors


def nul_bytes(doc: LoadedYaml, path: YamlPath, value: object, depth: int = 4) -> list[ConfigError]:
    """Errors for text holding a NUL byte (argv and environment strings end at the first one), `depth` levels down."""
    if isinstance(value, str):
        if "\0" not in value:
            return []
        message = f"{dotted(path)} contains a NUL byte, which no command line or environment can pass"
        return [error_at(doc, path, message, "remove the \\0 (or \\x00) escape from the value")]
    # Bounded: YAML aliases can nest a small file into billions of values, and no valid file goes deeper.
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [e for key, item in items if depth > 0 for e in nul_bytes(doc, (*path, key), item, depth - 1)]


def known_keys(doc: LoadedYaml, path: YamlPath, section: object, known: tuple[str, ...]) -> list[ConfigError]:
    """Errors for keys of `section` that are not in `known`."""
    return [unknown_key(doc, (*path, key), known) for key in as_mapping(section) if key not in known]


def _value_key(name: str, value: object, depth: int = 0) -> object:
    """A value as compared for repeats and exclude matches (raw YAML: lists and mappings as given)."""
    # Anything deeper than a bundle of flat lists is pydantic's error, and never turned into text:
    # YAML aliases can nest a small file into billions of values.
    if isinstance(value, dict) and not depth:
        return tuple(sorted((canonical_name(str(k)), _value_key(str(k), v, 1)) for k, v in value.items()))
    if isinstance(value, list) and not any(isinstance(v, (list, dict)) for v in value):
        return tuple(str(v) for v in value)
    if isinstance(value, (list, dict)):
        raise TypeError("nested value")
    if value is None or isinstance(value, (str, int, float, bool)):
        return normalized(canonical_value(name, value))
    raise TypeError(f"not a flag value: {type(value).__name__}")


def _bundle_values(axes: Mapping[Any, Any]) -> dict[str, dict[str, list[Any]]]:
    """Bundle axis -> each flag its bundles set -> the values they give it."""
    found: dict[str, dict[str, list[Any]]] = {}
    for name, values in axes.items():
        bundles = [v for v in _list(values) if isinstance(v, dict)]
        if bundles:
            members = found.setdefault(str(name), {})
            for bundle in bundles:
                for flag, value in bundle.items():
                    members.setdefault(canonical_name(str(flag)), []).append(value)
    return found


def _axes(doc: LoadedYaml, axes: Mapping[Any, Any]) -> list[ConfigError]:
    errors = flag_names(doc, ("matrix",), axes)
    set_by: dict[str, tuple[str, bool]] = {}
    for name, values in axes.items():
        path = ("matrix", name)
        if name in ("installs", "install"):
            errors.append(error_at(doc, path, "installs: is not a flag", "move `installs: [...]` to the top level"))
        elif isinstance(values, list) and not values:
            errors.append(error_at(doc, path, f"axis {name!r} has no values", "give at least one value, or remove it"))
        items = _list(values)
        bundles = [v for v in items if isinstance(v, dict) and set(v) != {"secret"}]
        if bundles and len(bundles) != len(items):
            message = f"axis {name!r} mixes bundles of flags (mappings) with plain values"
            fix = "write every value of a bundle axis as a mapping of flags ({} for none)"
            errors.append(error_at(doc, path, message, fix))
        flags = sorted({canonical_name(str(k)) for b in bundles for k in b}) if bundles else [canonical_name(str(name))]
        for flag in flags:
            # Two plain spellings of one flag are flag_names' error; a bundle's flag set elsewhere is this one.
            if flag in set_by and (bundles or set_by[flag][1]):
                message = f"flag {flag!r} is set by axis {name!r} and by axis {set_by[flag][0]!r}"
                errors.append(error_at(doc, path, message, "set each flag in one axis only"))
            set_by.setdefault(flag, (str(name), bool(bundles)))
        seen: dict[object, object] = {}
        for index, value in enumerate(items):
            if isinstance(value, dict):
                errors += flag_names(doc, (*path, index), value)
            try:
                key = _value_key(str(name), value)
                hash(key)
            except TypeError:
                continue  # pydantic's error (a nested list or mapping)
            if key in seen:
                shown = (MASK, MASK) if is_secret_name(str(name)) else (repr(value), repr(seen[key]))
                message = f"axis {name!r} lists {shown[0]} twice (as {shown[1]} too)"
                errors.append(error_at(doc, (*path, index), message, "remove the repeated value"))
            seen.setdefault(key, value)
    return errors


def _entries(doc: LoadedYaml, kind: str, entries: object, axes: Mapping[Any, Any]) -> list[ConfigError]:
    errors: list[ConfigError] = []
    for index, entry in enumerate(_list(entries)):
        path: YamlPath = ("matrix", kind, index)
        if not isinstance(entry, dict):
            continue
        errors += flag_names(doc, path, entry)
        for name, value in entry.items():
            if isinstance(value, dict) and set(value) != {"secret"}:
                errors += flag_names(doc, (*path, name), value)
        if kind == "exclude":
            errors += _exclude_entry(doc, path, entry, axes)
    return errors


def _exclude_entry(
    doc: LoadedYaml, path: YamlPath, entry: Mapping[Any, Any], axes: Mapping[Any, Any]
) -> list[ConfigError]:
    # GitHub Actions refuses exclude keys that are not axes; a value no axis has is as surely a typo.
    # A bundle's flags may be named by themselves, or under the bundle's axis as GitHub writes objects.
    if not entry:
        return [error_at(doc, path, "an empty exclude entry removes every combination", "delete it")]
    errors: list[ConfigError] = []
    bundles = _bundle_values(axes)
    known: dict[str, tuple[str, list[Any]]] = {}
    for axis, values in axes.items():
        if str(axis) not in bundles:
            known[canonical_name(str(axis))] = (f"axis {str(axis)!r}", _list(values))
    for axis, members in bundles.items():
        for flag, values in members.items():
            known.setdefault(flag, (f"the bundles of axis {axis!r}", values))
    for name, value in entry.items():
        if str(name) in bundles and (isinstance(value, dict) or canonical_name(str(name)) not in bundles[str(name)]):
            if not isinstance(value, dict):
                message = f"exclude key {name!r} is an axis of bundles; name the flags to match"
                fix = f"write `{name}: {{flag: value}}`, or the flag itself"
                errors.append(error_at(doc, (*path, name), message, fix))
                continue
            members = bundles[str(name)]
            for flag, item in value.items():
                scope = {canonical_name(str(f)): (f"the bundles of axis {name!r}", v) for f, v in members.items()}
                errors += _exclude_value(doc, (*path, name, flag), str(flag), item, scope, list(members))
            continue
        errors += _exclude_value(doc, (*path, name), str(name), value, known, [str(k) for k in axes])
    return errors


def _exclude_value(
    doc: LoadedYaml,
    where: YamlPath,
    name: str,
    value: object,
    known: Mapping[str, tuple[str, list[Any]]],
    names: list[str],
) -> list[ConfigError]:
    canonical = canonical_name(name)
    if canonical not in known:
        guess = did_you_mean(name, [*names, *known])
        fix = f"did you mean {guess!r}?" if guess else "exclude may only name axes, or flags of the axes' bundles"
        return [error_at(doc, where, f"exclude key {name!r} is not an axis of the matrix", fix)]
    what, values = known[canonical]
    try:
        shown = {_value_key(canonical, v) for v in values}
        present = _value_key(canonical, value) in shown
    except TypeError:
        return []  # a nested value: pydantic's error
    if present:
        return []
    if is_secret_name(canonical):  # the values are secrets: name none of them
        return [error_at(doc, where, f"exclude value {MASK} is not a value of {what}", "use one of the axis' values")]
    guess = did_you_mean(str(value), [str(v) for v in values])
    fix = f"did you mean {guess!r}?" if guess else f"use one of {values}"
    message = f"exclude value {value!r} is not a value of {what}, so it excludes nothing"
    return [error_at(doc, where, message, fix)]


def _flags_and_axes(doc: LoadedYaml, flags: Mapping[Any, Any], axes: Mapping[Any, Any]) -> list[ConfigError]:
    """Errors for a flag of `flags:` that an axis sets in every cell (each of its values, or each of its bundles):
    no cell would keep the `flags:` value. One that only some bundles set is their override of a default: fine."""
    by_axis: dict[str, str] = {}
    for name, values in axes.items():
        each = [
            {str(k) for k in v} if isinstance(v, dict) and set(v) != {"secret"} else {str(name)}
            for v in _list(values)
        ]
        for flag in set.intersection(*each) if each else set():
            by_axis.setdefault(canonical_name(flag), str(name))
    errors: list[ConfigError] = []
    for name in flags:
        axis = by_axis.get(canonical_name(str(name)))
        if axis is not None:
            message = f"{name!r} is set in flags: and by axis {axis!r}: every cell takes the axis' value"
            errors.append(error_at(doc, ("flags", name), message, f"remove {name!r} from flags:, or the axis"))
    return errors


def matrix_checks(doc: LoadedYaml) -> list[ConfigError]:
    """Every whole-file problem of a matrix document (its top level already known to be a mapping)."""
    data = as_mapping(doc.data)
    section = as_mapping(data.get("matrix"))
    axes = {k: v for k, v in section.items() if k not in ("include", "exclude")}
    errors = flag_names(doc, ("flags",), as_mapping(data.get("flags")))
    errors += env_names(doc, ("env",), as_mapping(data.get("env")))
    errors += shell_references(doc, ("env",), as_mapping(data.get("env")), "env")
    errors += shell_references(doc, ("flags",), as_mapping(data.get("flags")), "flag")
    errors += _axes(doc, axes)
    errors += _flags_and_axes(doc, as_mapping(data.get("flags")), axes)
    errors += _entries(doc, "include", section.get("include"), axes)
    errors += _entries(doc, "exclude", section.get("exclude"), axes)
    errors += known_keys(doc, ("deadlines",), data.get("deadlines"), DEADLINE_NAMES)
    errors += secret_errors(doc)
    errors += [e for key in ("name", "flags", "env", "matrix") for e in nul_bytes(doc, (key,), data.get(key))]
    installs = [str(n) for n in _list(data.get("installs"))]
    for index, name in enumerate(installs):
        if name in installs[:index]:
            errors.append(error_at(doc, ("installs", index), f"install {name!r} is listed twice", "list it once"))
    given = data.get("matrix")
    if given is None or (isinstance(given, dict) and not axes and not section.get("include")):
        message = "the matrix is empty: it has no axes and no include entries, so there is nothing to run"
        errors.append(error_at(doc, ("matrix",), message, "add an axis, e.g. `attention-backend: [triton, dsa]`"))
    return errors
