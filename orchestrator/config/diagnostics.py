"""Turn validation problems into `file:line: message (fix: ...)` errors.

pydantic reports a location as a tuple of keys and indexes; the YAML loader recorded the
line of each such path, so every error can point at the line to edit and say what to write.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence

from pydantic import ValidationError

from orchestrator.config.schema import EXAMPLES, kind_of
from orchestrator.config.yamlpos import LoadedYaml, YamlPath
from orchestrator.errors import ConfigError

KnownKeys = Callable[[YamlPath], Sequence[str]]
"""Section path -> the keys allowed there (for "did you mean")."""


def dotted(path: YamlPath) -> str:
    """`('matrix', 'include', 0, 'x')` -> `matrix.include[0].x`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a misspelt word, if any is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def error_at(doc: LoadedYaml, path: YamlPath, message: str, fix: str) -> ConfigError:
    """A ConfigError at the line of `path` (or its closest ancestor) in `doc`."""
    return ConfigError(message, file=doc.file, line=doc.nearest_line(path), fix=fix)


def unknown_key(doc: LoadedYaml, path: YamlPath, known: Sequence[str], where: str = "") -> ConfigError:
    """The error for a key that is not allowed at `path`, suggesting the nearest allowed one."""
    key = str(path[-1])
    section = where or (f"in {dotted(path[:-1])}" if path[:-1] else "at the top level")
    guess = did_you_mean(key, known)
    fix = f"did you mean {guess!r}?" if guess else f"use one of: {', '.join(known)}"
    return error_at(doc, path, f"unknown key {key!r} {section}", fix)


def _fix_for(path: YamlPath, expected: str, given: object) -> str:
    names = [p for p in path if isinstance(p, str)]
    if expected.startswith("a valid list") and names:
        return f"write a list: `{names[-1]}: [{given}]`"
    for key in (".".join(names[-2:]), names[-1] if names else ""):
        if key in EXAMPLES:
            return f"write it like `{EXAMPLES[key]}`"
    return f"change it to {expected.split(',')[0]}"


def from_pydantic(
    exc: ValidationError, doc: LoadedYaml, known_keys: KnownKeys, prefix: YamlPath = ()
) -> list[ConfigError]:
    """One ConfigError per pydantic error, located in `doc` (`prefix`: where the validated value sits)."""
    errors: list[ConfigError] = []
    for err in exc.errors():
        path: YamlPath = (*prefix, *err["loc"])
        kind, ctx = err["type"], err.get("ctx") or {}
        if path and path[-1] == "[key]":
            path = path[:-1]
            errors.append(error_at(doc, path, f"{dotted(path)}: keys must be text", f"quote the key: '{path[-1]}'"))
        elif kind in ("extra_forbidden", "unexpected_keyword_argument"):
            errors.append(unknown_key(doc, path, known_keys(path[:-1])))
        elif kind == "missing":
            key = str(path[-1])
            where = f" in {dotted(path[:-1])}" if path[:-1] else ""
            example = EXAMPLES.get(key, f"{key}: ...")
            errors.append(error_at(doc, path, f"missing required key {key!r}{where}", f"add `{example}`"))
        elif "fix" in ctx:
            errors.append(error_at(doc, path, f"{dotted(path)}: {err['msg']}", str(ctx["fix"])))
        else:
            expected = err["msg"].removeprefix("Input should be ")
            if expected.startswith(("greater", "less")):
                expected = f"a number {expected}"
            message = f"{dotted(path)}: expected {expected}, got {kind_of(err['input'])}"
            errors.append(error_at(doc, path, message, _fix_for(path, expected, err["input"])))
    return errors
