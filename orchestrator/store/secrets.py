"""The store's last line of defence against secrets: values under secret-looking names become `***`.

Callers already mask (ShellCommand, masked env), but a token written to the database once stays in
its pages and backups, so every record is scrubbed again on its way in. Names decide, not values:
`HF_TOKEN`, `api-key`, `AWS_SECRET_ACCESS_KEY` are secret; `max_new_tokens`, `tokenizer` are not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

_WORD = r"(?:token|secret|password|passwd|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)"
_SECRET_NAME = re.compile(rf"(?i)(?:^|[_-]){_WORD}$")

_VALUE = r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s,;)\]}]+)"
# `--api-key sk-1` and `--hf-token=x` on a command line: a flag, then its value.
_FLAG_ASSIGN = re.compile(rf"(?<![\w-])(?P<name>--(?:[a-z0-9]+-)*(?i:{_WORD}))(?P<sep>=|\s+){_VALUE}")
# `HF_TOKEN=x`, `api_key='x'`, `HF_TOKEN: x`, and a matrix file's `api-key: x` (flag names are dashed).
# A bare lower-case `token:` is left alone: in log lines it is prose far more often than a secret.
_NAME_ASSIGN = re.compile(
    rf"(?<![\w-])(?P<name>(?:[A-Za-z0-9]+[_-])+(?i:{_WORD})|(?i:(?:api|access|secret|private)[_-]key)|TOKEN|PASSWORD|SECRET)"
    rf"(?P<sep>['\"]?\s*[=:]\s*){_VALUE}"
)
_KEEP = {MASK, "None", "null", "''", '""'}


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name holds a secret by its name."""
    return bool(_SECRET_NAME.search(name))


def _mask_match(match: re.Match[str]) -> str:
    value = match.group("value")
    # An empty or already-masked value and a reference such as ${HF_TOKEN} reveal nothing.
    if value.strip("'\"") in _KEEP or value in _KEEP or value.lstrip("'\"").startswith("$"):
        return match.group(0)
    quote = value[0] if value[0] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{match.group('name')}{match.group('sep')}{quote}{MASK}{quote}"


def scrub_text(text: str) -> str:
    """The text with values of secret-named assignments and flags replaced by `***`."""
    return _NAME_ASSIGN.sub(_mask_match, _FLAG_ASSIGN.sub(_mask_match, text))


def _reveals(value: Any) -> bool:
    # A bare flag (True) or an unset value under a secret name says nothing; keep its type.
    return value is not None and not isinstance(value, bool) and value != ""


def scrub(value: Any) -> Any:
    """A JSON-like value with secret-named keys masked and every string scrubbed, recursively."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, Mapping):
        return {k: (MASK if is_secret_name(str(k)) and _reveals(v) else scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value
