"""Turn a launcher's real `--help` output into a FlagGrammar.

argparse prints every option twice: once in the usage block (which alone says which options
are required, and shows `[--x | --no-x]` for BooleanOptionalAction) and once in the
options section (which alone lists every alias, `--tp-size TP_SIZE, --tensor-parallel-size
TP_SIZE`). Both are read and merged. Only the text is trusted, never a table kept here, so a
new SGLang release needs nothing but its `--help`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.matrix.grammar import FlagGrammar, FlagSpec

_USAGE = re.compile(r"^usage: (?P<prog>.+?) (?=\[-h\]|--|\[--|$)", re.MULTILINE)
# argparse's own regex for splitting usage into parts; it never breaks a part across lines.
_USAGE_PART = re.compile(r"\(.*?\)+(?=\s|$)|\[.*?\]+(?=\s|$)|\S+")
_INVOCATION = re.compile(r"^  (?P<inv>-\S.*?)(?:\s{2,}|$)")
_SPELLING_SEP = re.compile(r", (?=-)")
_METAVAR = r"(?:\{[^}]*\}?|[^\s\[\]]+)"
_NARGS_FORMS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(rf"^(?P<m>{_METAVAR})$"), None),
    (re.compile(rf"^\[(?P<m>{_METAVAR})\]$"), "?"),
    # 3.9+ prints `[X ...]` for nargs="*", older releases `[X [X ...]]`.
    (re.compile(rf"^\[(?P<m>{_METAVAR})(?: \[{_METAVAR})? \.\.\.\]\]?$"), "*"),
    (re.compile(rf"^(?P<m>{_METAVAR}) \[{_METAVAR} \.\.\.\]$"), "+"),
)
_VERSION = re.compile(r"\bsglang(?:[ _-]?version)?[:=]?\s+v?(\d+\.\d+(?:\.\d+)?(?:[.+-]?\w+)*)", re.IGNORECASE)


@dataclass(frozen=True)
class _Args:
    """What follows an option string: how many values, their choices, their metavar."""

    takes_value: bool
    nargs: str | None
    choices: tuple[str, ...] | None
    metavar: str | None
    complete: bool
    """False where a `{...}` choice list was cut off."""


def parse_help(text: str, version: str | None = None) -> FlagGrammar:
    """Parse `--help` output (stray lines before `usage:` allowed) into the release's flag grammar."""
    match = _USAGE.search(text)
    if match is None:
        raise ValueError("no 'usage:' line in the help text")
    prog = match.group("prog")
    usage_text, options_text = _split_sections(text[match.start() :])
    usage = _parse_usage(usage_text[len("usage: ") + len(prog) :])
    specs = [_merge(names, args, usage) for names, args in _parse_options(options_text)]
    return FlagGrammar(version=version or _find_version(text) or "unknown", prog=prog, flags=tuple(specs))


def _split_sections(text: str) -> tuple[str, str]:
    """The usage block (up to the first blank line) and everything after it."""
    usage, _, rest = text.partition("\n\n")
    return usage, rest


def _find_version(text: str) -> str | None:
    match = _VERSION.search(text)
    return match.group(1) if match else None


_PATH_VERSION = re.compile(r"(?<![\d.])v?(\d+\.\d+\.\d+(?:(?:rc|\.dev|\.post)\d+)?)(?!\d|\.\d)")


def version_of_capture(text: str, path: str) -> str | None:
    """The release a saved `--help` belongs to: said in the text, else named by the file or its folder
    (`captures/0.5.19/help.txt`, `help-0.5.19.txt`), nearest part first; None if neither says."""
    found = _find_version(text)
    if found:
        return found
    for part in reversed(path.replace("\\", "/").split("/")):
        match = _PATH_VERSION.search(part)
        if match:
            return match.group(1)
    return None


@dataclass(frozen=True)
class _UsageEntry:
    args: _Args
    required: bool
    alternatives: tuple[str, ...]


def _parse_usage(body: str) -> dict[str, _UsageEntry]:
    """Primary option string -> what usage says about it."""
    entries: dict[str, _UsageEntry] = {}
    parts = _USAGE_PART.findall(" ".join(body.split()))
    i = 0
    while i < len(parts):
        part = parts[i]
        i += 1
        if part.startswith(("[-", "(-")):
            required = part.startswith("(")
            for alternative in part[1:-1].split(" | "):
                _add_usage_entry(entries, alternative.split(" ", 1), required, part)
        elif part.startswith("-"):
            # A required option prints bare, its metavars (or `| --no-x`) as separate parts.
            words = []
            while i < len(parts) and not parts[i].startswith(("-", "[-", "(-")) and parts[i] != "|":
                words.append(parts[i])
                i += 1
            group = part
            if i + 1 < len(parts) and parts[i] == "|":
                group = f"{part} | {parts[i + 1]}"
                i += 2
            _add_usage_entry(entries, [part, " ".join(words)], True, group)
    return entries


def _add_usage_entry(entries: dict[str, _UsageEntry], words: list[str], required: bool, group: str) -> None:
    name = words[0]
    spec = words[1] if len(words) > 1 else ""
    alternatives = tuple(a.split(" ", 1)[0] for a in group.strip("[]()").split(" | ")) if " | " in group else ()
    entries[name] = _UsageEntry(_parse_args(spec), required, alternatives)


def _parse_options(text: str) -> list[tuple[list[str], _Args]]:
    """Every option line of the options section: its spellings and what follows them."""
    found: list[tuple[list[str], _Args]] = []
    for line in text.splitlines():
        match = _INVOCATION.match(line)
        if match is None:
            continue
        names: list[str] = []
        args = _parse_args("")
        for spelling in _SPELLING_SEP.split(match.group("inv")):
            name, _, spec = spelling.partition(" ")
            names.append(name)
            args = _parse_args(spec)
        long_names = [n for n in names if n.startswith("--")]
        if long_names:
            found.append((long_names, args))
    return found


def _parse_args(spec: str) -> _Args:
    if not spec:
        return _Args(False, None, None, None, True)
    for pattern, nargs in _NARGS_FORMS:
        match = pattern.match(spec)
        if match:
            return _metavar_args(match.group("m"), nargs)
    # nargs=N prints the metavar N times.
    words = spec.split(" ")
    return _metavar_args(words[0], str(len(words)))


def _metavar_args(metavar: str, nargs: str | None) -> _Args:
    if not metavar.startswith("{"):
        return _Args(True, nargs, None, metavar, True)
    complete = metavar.endswith("}")
    choices = tuple(c for c in metavar.strip("{}").split(",") if c)
    return _Args(True, nargs, choices, None, complete)


def _merge(names: list[str], args: _Args, usage: dict[str, _UsageEntry]) -> FlagSpec:
    entry = usage.get(names[0])
    if entry is not None and not args.complete and entry.args.complete:
        args = entry.args
    negatable = entry is not None and len(entry.alternatives) == 2 and entry.alternatives[1] in names
    return FlagSpec(
        names=tuple(names),
        takes_value=args.takes_value,
        nargs=args.nargs,
        choices=args.choices,
        required=entry.required if entry is not None else False,
        negatable=negatable,
        metavar=args.metavar,
    )
