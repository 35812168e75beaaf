"""Predict what a release's launcher rejects, before any GPU time is spent on it.

`check_argv` replays CPython 3.11's argparse (allow_abbrev=True) over a FlagGrammar: the same
classification of argument strings, the same order of errors, the same messages, so a cell
that would die in argparse is marked invalid with the text the real host would print.
`translate_cell` turns canonical cell flags into the spellings one release accepts.
Value types (`invalid int value`) are checked for SGLang's numeric flags (matrix/valuetypes.py),
which `--help` does not show.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.matrix.flags import canonical_name, spellings, value_spellings
from orchestrator.matrix.grammar import FlagGrammar, FlagSpec
from orchestrator.matrix.suggest import rename_note, unknown_flag_hint
from orchestrator.matrix.valuetypes import value_type
from orchestrator.model import FlagValue

ErrorKind = Literal["invalid_choice", "unrecognized", "ambiguous", "missing_value", "required", "other"]
CellFlags = Mapping[str, FlagValue | Sequence[str | int | float]]

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# argparse's nargs patterns for optionals, over one letter per following string: A(rgument), O(ption), -(-).
_NARGS_PATTERN: dict[str | None, str] = {None: "A", "?": "A?", "*": "A*", "+": "A+"}
_NARGS_ERROR: dict[str | None, str] = {
    None: "expected one argument",
    "?": "expected at most one argument",
    "+": "expected at least one argument",
}


@dataclass(frozen=True)
class ArgvError:
    """One argparse failure: the full `prog: error: ...` line and what it is about."""

    message: str
    kind: ErrorKind
    flag: str | None = None
    """The option's primary spelling; as given where argparse matched none (unrecognized, ambiguous)."""
    value: str | None = None
    """The rejected value; for `unrecognized`, every unrecognized string, space-separated."""


@dataclass
class CellTranslation:
    """A cell's flags in one release's spelling, and why they would be rejected if they would."""

    ok: bool
    argv: list[str]
    renamed: dict[str, str] = field(default_factory=dict)
    """Canonical flag -> the host's spelling (with dashes), only where they differ."""
    renamed_values: dict[str, str] = field(default_factory=dict)
    """Canonical flag -> the host's spelling of its value, only where it differs from the cell's."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the launch will say differently from the matrix: a renamed flag, a prefix read as a whole flag."""


class _Rejected(Exception):
    def __init__(self, error: ArgvError) -> None:
        super().__init__(error.message)
        self.error = error


class _Parse:
    """One argparse run over argv; raises _Rejected with the first error argparse would report."""

    def __init__(self, grammar: FlagGrammar, argv: list[str]) -> None:
        self.grammar = grammar
        self.argv = argv
        self.extras: list[str] = []
        self.seen: set[FlagSpec] = set()
        self.helped = False

    def fail(self, kind: ErrorKind, text: str, flag: str | None = None, value: str | None = None) -> _Rejected:
        return _Rejected(ArgvError(f"{self.grammar.prog}: error: {text}", kind, flag, value))

    def argument_error(self, spec: FlagSpec, kind: ErrorKind, text: str, value: str | None = None) -> _Rejected:
        # A grammar keeps long spellings only; argparse names an action by all of them, `-h` too.
        names = ("-h", *spec.names) if spec.primary == "--help" else spec.names
        return self.fail(kind, f"argument {'/'.join(names)}: {text}", spec.primary, value)

    def classify(self, arg: str) -> tuple[FlagSpec | None, str, str | None] | None:
        """argparse's _parse_optional: None for an argument, else (spec or None if unknown, option, explicit)."""
        if len(arg) < 2 or arg[0] != "-":
            return None
        # The launcher's only short option is -h; nothing else can match a single dash.
        spec = self.grammar.lookup("--help") if arg == "-h" else self.grammar.lookup(arg) if arg[1] == "-" else None
        if spec is not None:
            return spec, arg, None
        if "=" in arg:
            option, explicit = arg.split("=", 1)
            spec = self.grammar.lookup(option) if option.startswith("--") else None
            if spec is not None:
                return spec, option, explicit
        if arg.startswith("-h"):  # argparse reads `-hX` as -h with the attached value X
            return self.grammar.lookup("--help"), "-h", arg[3:] if arg.startswith("-h=") else arg[2:]
        matches = self.prefix_matches(arg)
        if len(matches) > 1:
            text = f"ambiguous option: {arg} could match {', '.join(m[1] for m in matches)}"
            raise self.fail("ambiguous", text, arg.split("=", 1)[0])
        if matches:
            return matches[0]
        if _NEGATIVE_NUMBER.match(arg) or " " in arg:
            return None
        return None, arg, None

    def prefix_matches(self, arg: str) -> list[tuple[FlagSpec | None, str, str | None]]:
        if not arg.startswith("--"):
            return []
        prefix, _, explicit = arg.partition("=")
        found = [(self.grammar.lookup(n), n, explicit if "=" in arg else None) for n in self.grammar.names()]
        return [m for m in found if m[1].startswith(prefix)]

    def run(self, check_required: bool) -> None:
        options: dict[int, tuple[FlagSpec | None, str, str | None]] = {}
        pattern = []
        for i, arg in enumerate(self.argv):
            if arg == "--":
                pattern.append("-")
                pattern.extend("A" * (len(self.argv) - i - 1))
                break
            found = self.classify(arg)
            if found is not None:
                options[i] = found
            pattern.append("A" if found is None else "O")
        letters = "".join(pattern)
        start = 0
        while options and start <= max(options) and not self.helped:
            next_option = min(i for i in options if i >= start)
            self.extras.extend(self.argv[start:next_option])
            start = self.consume(next_option, options[next_option], letters)
        if self.helped:
            return
        self.extras.extend(self.argv[start:])
        missing = [s for s in self.grammar.flags if s.required and s not in self.seen]
        if check_required and missing:
            names = ", ".join("/".join(s.names) for s in missing)
            raise self.fail("required", f"the following arguments are required: {names}", missing[0].primary)
        if self.extras:
            unknown = next((e for e in self.extras if e.startswith("-")), None)
            listed = " ".join(self.extras)
            raise self.fail("unrecognized", f"unrecognized arguments: {listed}", unknown, listed)

    def consume(self, index: int, option: tuple[FlagSpec | None, str, str | None], letters: str) -> int:
        spec, option_string, explicit = option
        if spec is None:
            self.extras.append(self.argv[index])
            return index + 1
        if option_string == "-h" and explicit:
            # Attached letters are more short options; only -h exists, so `-hh` is help and `-hhx` fails on x.
            explicit = explicit.lstrip("h") or None
        if explicit is not None:
            if self.match(spec, "A") != 1:
                raise self.argument_error(spec, "other", f"ignored explicit argument {explicit!r}", explicit)
            self.take(spec, [explicit])
            return index + 1
        count = self.match(spec, letters[index + 1 :])
        self.take(spec, self.argv[index + 1 : index + 1 + count])
        return index + 1 + count

    def match(self, spec: FlagSpec, letters: str) -> int:
        if not spec.takes_value:
            return 0
        nargs = spec.nargs
        expected = _NARGS_PATTERN.get(nargs) or "A" * int(nargs or 1)
        found = re.match(expected, letters)
        if found is None:
            text = _NARGS_ERROR.get(nargs) or f"expected {nargs} argument{'' if nargs == '1' else 's'}"
            raise self.argument_error(spec, "missing_value", text)
        return len(found.group())

    def take(self, spec: FlagSpec, values: list[str]) -> None:
        self.seen.add(spec)
        if "--" in values:  # 3.11 drops one `--` from an option's values unchecked, so `--x=--` passes
            values = values.copy()
            values.remove("--")
        kind = value_type(spec)
        for value in values:
            if kind is None:
                break
            try:
                kind(value)
            except ValueError:
                text = f"invalid {getattr(kind, '__name__', repr(kind))} value: {value!r}"
                raise self.argument_error(spec, "other", text, value) from None
        for value in values:
            if spec.choices is not None and value not in spec.choices:
                listed = ", ".join(repr(c) for c in spec.choices)
                text = f"invalid choice: {value!r} (choose from {listed})"
                raise self.argument_error(spec, "invalid_choice", text, value)
        if spec.primary == "--help":
            self.helped = True


def check_argv(grammar: FlagGrammar, argv: list[str], *, check_required: bool = True) -> ArgvError | None:
    """The error the release's argparse would print for argv (3.11 wording), or None if it parses."""
    try:
        _Parse(grammar, argv).run(check_required)
    except _Rejected as rejected:
        return rejected.error
    return None


def translate_cell(grammar: FlagGrammar, flags: CellFlags, *, check_required: bool = True) -> CellTranslation:
    """Spell canonical cell flags the way this release accepts them, and say what it would reject."""
    result = CellTranslation(ok=True, argv=[])
    for given, value in flags.items():
        if value is None or value is False:
            continue
        canonical = canonical_name(given)
        spelled = _spell_flag(grammar, canonical)
        if spelled is None:
            result.problems.append(_unknown_flag(grammar, canonical, value))
            continue
        spec, spelling = spelled
        if spelling != f"--{canonical}":
            result.renamed[canonical] = spelling
            result.notes.append(rename_note(grammar, canonical, spelling))
        items = _flag_items(grammar, spec, spelling, canonical, value, result)
        if items is not None:
            result.argv.extend(items)
    final = check_argv(grammar, result.argv, check_required=check_required)
    if final is not None and (final.kind == "required" or not result.problems):
        result.problems.append(f"{grammar.release} would reject the launch; argparse says: {final.message}")
    result.ok = not result.problems
    return result


def _spell_flag(grammar: FlagGrammar, canonical: str) -> tuple[FlagSpec, str] | None:
    """The first known spelling this release has, else its one unique long option starting with the name."""
    for name in spellings(canonical):
        spec = grammar.lookup(name)
        if spec is not None:
            return spec, f"--{name}"
    prefixed = [n for n in grammar.names() if n.startswith(f"--{canonical}")]
    spec = grammar.lookup(prefixed[0]) if len(prefixed) == 1 else None
    return (spec, prefixed[0]) if spec is not None else None


def _unknown_flag(grammar: FlagGrammar, canonical: str, value: object) -> str:
    argv = [f"--{canonical}", *([] if value is True else _strings(value))]
    error = check_argv(grammar, argv, check_required=False)
    said = f"; argparse says: {error.message}" if error is not None else ""
    return f"--{canonical} does not exist in {grammar.release}{unknown_flag_hint(grammar, canonical)}{said}"


def _strings(value: object) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def _flag_items(
    grammar: FlagGrammar, spec: FlagSpec, spelling: str, canonical: str, value: object, result: CellTranslation
) -> list[str] | None:
    """argv items for one flag, or None after recording why the release would reject it."""
    release = grammar.release
    if value is True:
        if spec.takes_value and spec.nargs not in ("?", "*"):
            _reject(grammar, result, [spelling], f"{spelling} needs a value in {release}")
            return None
        return [spelling]
    if not spec.takes_value:
        reason = f"{spelling} takes no value in {release} (got {value!r}; use true to pass it, false to omit it)"
        _reject(grammar, result, [spelling, *_strings(value)], reason)
        return None
    values = _strings(value)
    chosen = [_spell_value(spec, canonical, v) for v in values]
    bad = [v for v, c in zip(values, chosen, strict=True) if c is None]
    if bad:
        listed = ", ".join(spec.choices or ())
        close = difflib.get_close_matches(bad[0], spec.choices or (), n=3, cutoff=0.8)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        reason = f"{canonical} {bad[0]} is not a choice in {release}; choices: {listed}{hint}"
        _reject(grammar, result, [spelling, *values], reason)
        return None
    spelled = [c for c in chosen if c is not None]
    if isinstance(value, (list, tuple)) and spec.nargs not in ("*", "+"):
        if len(values) > 1 and spec.nargs in (None, "?"):
            reason = f"{spelling} takes one value in {release}, not a list of {len(values)}"
        elif spec.nargs not in (None, "?") and len(values) != int(spec.nargs or 1):
            reason = f"{spelling} takes {spec.nargs} values in {release}, not {len(values)}"
        else:
            reason = ""
        if reason:
            _reject(grammar, result, [spelling, *spelled], reason)
            return None
    if isinstance(value, str) and len(value.split()) > 1 and spec.nargs in ("*", "+"):
        example = ", ".join(value.split())
        reason = (
            f"{spelling} takes several values, and a string goes to SGLang as one argument ({value!r}); "
            f"write them as a YAML list: `{canonical}: [{example}]`"
        )
        _reject(grammar, result, [spelling, value], reason)
        return None
    if spelled != values:
        result.renamed_values[canonical] = " ".join(spelled)
    # `--x=-v` keeps argparse from taking a dash-leading value for an option.
    if len(spelled) == 1 and spelled[0].startswith("-") and not _NEGATIVE_NUMBER.match(spelled[0]):
        return [f"{spelling}={spelled[0]}"]
    return [spelling, *spelled]


def _spell_value(spec: FlagSpec, canonical: str, value: str) -> str | None:
    if spec.choices is None:
        return value
    return next((v for v in value_spellings(canonical, value) if v in spec.choices), None)


def _reject(grammar: FlagGrammar, result: CellTranslation, argv: list[str], reason: str) -> None:
    error = check_argv(grammar, argv, check_required=False)
    result.problems.append(f"{reason}; argparse says: {error.message}" if error is not None else reason)
