"""Pure: which flags the server did not run as it was asked (SGLang rewrites some at start, often in one line).

SGLang's `ServerArgs.__post_init__` replaces values it cannot honour on this hardware or model (a backend
chosen for the GPU, `--chunked-prefill-size` turned off for speculative decoding, the page size forced for
DSA models) and the model runner changes more later; `server_args=ServerArgs(...)` in the log shows the
values after the first, `/server_info` after both. A cell that "passes" with its axis value replaced did not
test what the table claims, so every flag the launch set is compared with what ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

IGNORED = frozenset({"host", "port", "api_key", "model_path", "tokenizer_path", "served_model_name"})
"""Flags the orchestrator sets itself, secrets, and paths SGLang normalises: never a drift."""
_LIST = re.compile(r"^\[(.*)\]$")


@dataclass(frozen=True)
class Drift:
    """One flag the server ran with another value than the launch asked for."""

    flag: str
    asked: str
    used: str
    evidence: str
    """The log line that says so, or where the value was read (`/server_info`, `server_args`)."""

    def to_dict(self) -> dict[str, str]:
        """The store's and the JSON's form: {asked, used, evidence}."""
        return {"asked": self.asked, "used": self.used, "evidence": self.evidence}


def asked_flags(argv: Sequence[str]) -> dict[str, str]:
    """Argparse dest -> the value a launch's flag words ask for (`true` for a bare switch, values space-joined).

    `argv` holds the words after the launcher (secret words already left out by the caller).
    """
    asked: dict[str, str] = {}
    name: str | None = None
    values: list[str] = []
    for word in [*argv, "--"]:
        if word.startswith("--"):
            if name is not None:
                asked[name] = " ".join(values) if values else "true"
            name, values = (word[2:].split("=", 1)[0].replace("-", "_") or None), []
            if "=" in word:
                values.append(word.split("=", 1)[1])
        elif name is not None:
            values.append(word)
    return {k: v for k, v in asked.items() if k not in IGNORED}


def find_drift(
    asked: Mapping[str, str],
    server_args: Mapping[str, str],
    server_info: Mapping[str, Any] | None,
    lines: Iterable[str],
) -> dict[str, Drift]:
    """Flag (as written on the command line) -> its Drift, for every asked flag that ran otherwise.

    `/server_info` is read after ready and wins: it holds what the model runner finally used; the log's
    `server_args` line is the fallback. `lines` are log lines to cite as evidence.
    """
    kept = list(lines)
    found: dict[str, Drift] = {}
    for dest, want in asked.items():
        used, where = _used(dest, server_args, server_info)
        if used is None or want == "auto" or _same(want, used):
            continue
        flag = dest.replace("_", "-")
        found[flag] = Drift(flag, want, used, _evidence(dest, used, kept) or where)
    return found


def _used(dest: str, server_args: Mapping[str, str], info: Mapping[str, Any] | None) -> tuple[str | None, str]:
    if info is not None and dest in info and info[dest] is not None and not isinstance(info[dest], dict):
        value = info[dest]
        return (" ".join(map(str, value)) if isinstance(value, list) else str(value)), f"/server_info: {dest}={value}"
    if dest in server_args:
        return server_args[dest], f"server_args: {dest}={server_args[dest]}"
    return None, ""


def _same(asked: str, used: str) -> bool:
    a, u = _norm(asked), _norm(used)
    if a == u:
        return True
    try:
        return float(a) == float(u)
    except ValueError:
        return False


def _norm(value: str) -> str:
    text = value.strip().strip("'\"").lower()
    listed = _LIST.match(text)
    if listed:
        text = " ".join(part.strip().strip("'\"") for part in listed.group(1).split(",") if part.strip())
    return {"none": "", "null": ""}.get(text, text)


def _evidence(dest: str, used: str, lines: list[str]) -> str | None:
    """The log line that names the flag (its dest, or its words) and preferably the value it ran with."""
    words = dest.split("_")
    phrases = [dest] + [" ".join(words[:n]) for n in range(len(words), 1, -1)]
    naming = [
        line for line in lines
        if "server_args=ServerArgs(" not in line and any(p in line.lower().replace("-", " ") or p in line.lower()
                                                         for p in phrases)
    ]  # fmt: skip
    with_value = [line for line in naming if _norm(used) and _norm(used) in line.lower()]
    chosen = with_value or naming
    return chosen[0].strip() if chosen else None


class FlagLines:
    """Collects, as a log streams by, the lines that name one of a launch's flags: a drift's evidence."""

    LIMIT = 200

    def __init__(self, dests: Iterable[str]) -> None:
        # A line names a flag by its dest (`chunked_prefill_size`) or its first words (`chunked prefill`).
        self.words = [w for dest in dests for w in ([dest, " ".join(dest.split("_")[:2])] if "_" in dest else [dest])]
        self.lines: list[str] = []

    def wants(self, line: str) -> bool:
        """Whether to keep `line` (it names a flag, and fewer than LIMIT are kept)."""
        if len(self.lines) >= self.LIMIT or not self.words or "server_args=" in line:
            return False
        lowered = line.lower()
        spaced = lowered.replace("-", " ").replace("_", " ")
        return any(w in lowered or w in spaced for w in self.words)
