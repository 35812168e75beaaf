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
from orchestrator.config.yamlpos import LoadedYaml, YamlPath
from orchestrator.errors import ConfigError
from orchestrator.matrix.expand import normalized
from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.settings import Deadlines

FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
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


def _axes(doc: LoadedYaml, axes: Mapping[Any, Any]) -> list[ConfigError]:
    errors = flag_names(doc, ("matrix",), axes)
    for name, values in axes.items():
        path = ("matrix", name)
        if name in ("installs", "install"):
            errors.append(error_at(doc, path, "installs: is not a flag", "move `installs: [...]` to the top level"))
        elif isinstance(values, list) and not values:
            errors.append(error_at(doc, path, f"axis {name!r} has no values", "give at least one value, or remove it"))
        seen: dict[object, object] = {}
        for index, value in enumerate(_list(values)):
            if isinstance(value, (list, dict)):
                continue  # pydantic's error; and str() of an alias-nested list can be gigabytes
            key = normalized(canonical_value(str(name), value))
            if key in seen:
                message = f"axis {name!r} lists {value!r} twice (as {seen[key]!r} too)"
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
        if kind == "exclude":
            errors += _exclude_entry(doc, path, entry, axes)
    return errors


def _exclude_entry(
    doc: LoadedYaml, path: YamlPath, entry: Mapping[Any, Any], axes: Mapping[Any, Any]
) -> list[ConfigError]:
    # GitHub Actions refuses exclude keys that are not axes; a value no axis has is as surely a typo.
    if not entry:
        return [error_at(doc, path, "an empty exclude entry removes every combination", "delete it")]
    errors: list[ConfigError] = []
    by_canonical = {canonical_name(str(k)): (str(k), _list(v)) for k, v in axes.items()}
    for name, value in entry.items():
        if canonical_name(str(name)) not in by_canonical:
            guess = did_you_mean(str(name), [str(k) for k in axes])
            fix = f"did you mean {guess!r}?" if guess else "exclude may only name axes of the matrix"
            errors.append(error_at(doc, (*path, name), f"exclude key {name!r} is not an axis of the matrix", fix))
            continue
        axis, values = by_canonical[canonical_name(str(name))]
        shown = [normalized(canonical_value(axis, v)) for v in values]
        if normalized(canonical_value(axis, value)) not in shown:
            guess = did_you_mean(str(value), [str(v) for v in values])
            fix = f"did you mean {guess!r}?" if guess else f"use one of {values}"
            message = f"exclude value {value!r} is not a value of axis {axis!r}, so it excludes nothing"
            errors.append(error_at(doc, (*path, name), message, fix))
    return errors


def matrix_checks(doc: LoadedYaml) -> list[ConfigError]:
    """Every whole-file problem of a matrix document (its top level already known to be a mapping)."""
    data = as_mapping(doc.data)
    section = as_mapping(data.get("matrix"))
    axes = {k: v for k, v in section.items() if k not in ("include", "exclude")}
    errors = flag_names(doc, ("flags",), as_mapping(data.get("flags")))
    errors += env_names(doc, ("env",), as_mapping(data.get("env")))
    errors += _axes(doc, axes)
    errors += _entries(doc, "include", section.get("include"), axes)
    errors += _entries(doc, "exclude", section.get("exclude"), axes)
    errors += known_keys(doc, ("deadlines",), data.get("deadlines"), DEADLINE_NAMES)
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
