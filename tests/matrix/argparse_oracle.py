"""The tests' oracle of argparse's own verdict: read a launcher's real `usage: ... error: ...` output.

Preflight never runs argparse to judge a cell (it predicts it with check_argv); the tests hold the prediction
against what argparse printed for the same argv in the real captures, read with this.
"""

from __future__ import annotations

import re

from orchestrator.matrix.validate import ArgvError, ErrorKind

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_USAGE_LINE = re.compile(r"^usage: (?P<prog>.+?) (?:\[-h\]|--|\[--)", re.MULTILINE)
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_MESSAGES: tuple[tuple[ErrorKind, re.Pattern[str]], ...] = (
    ("invalid_choice", re.compile(rf"^argument (?P<flag>\S+): invalid choice: (?P<value>{_QUOTED}|\S+) \(choose from")),
    ("unrecognized", re.compile(r"^unrecognized arguments: (?P<value>.*)$")),
    ("ambiguous", re.compile(r"^ambiguous option: (?P<flag>[^=\s]+)(?:=(?P<value>\S*))? could match")),
    ("missing_value", re.compile(r"^argument (?P<flag>\S+): expected (?:one|at least one|at most one|\d+) argument")),
    ("required", re.compile(r"^the following arguments are required: (?P<flag>[^,/\s]+)")),
    ("other", re.compile(r"^argument (?P<flag>\S+): ")),
)


def parse_argparse_error(text: str) -> ArgvError | None:
    """Recognise an argparse failure (a usage block, then `prog: error: ...`) in a launcher's output."""
    clean = _ANSI.sub("", text)
    usage = _USAGE_LINE.search(clean)
    if usage is None:
        return None
    prog = re.escape(usage.group("prog"))
    error = re.search(rf"^{prog}: error: (?P<msg>.*)$", clean[usage.end() :], re.MULTILINE)
    if error is None:
        return None
    message = error.group("msg").rstrip()
    for kind, pattern in _MESSAGES:
        found = pattern.match(message)
        if found is None:
            continue
        groups = found.groupdict()
        flag = groups.get("flag")
        value = groups.get("value")
        if kind == "unrecognized":
            flag = next((w for w in message.split()[2:] if w.startswith("-")), None)
        if flag is not None:
            flag = flag.split("/")[0]
        if value is not None and value[:1] in "'\"" and len(value) > 1:
            value = value[1:-1]
        return ArgvError(error.group(0).rstrip(), kind, flag, value)
    return ArgvError(error.group(0).rstrip(), "other")
