"""Shell commands as objects: every value quoted, secrets masked in what is logged or stored.

`str(cmd)` is the masked form (logs, the store, cmd.sh shown to users); `cmd.raw()` is what is
sent to a host. Values are never pasted into f-strings: a flag value such as `$(touch x)` must
reach SGLang as those literal characters. Modelled on pyinfra's StringCommand / MaskString.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from orchestrator.secret import MASK as MASK  # re-exported: the one mask, as the shell writes it
from orchestrator.secret import is_secret_name, masked_names

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

Value = str | int | float | os.PathLike[str]


@dataclass(frozen=True)
class Raw:
    """Shell syntax inserted verbatim (operators such as `&&`, `|`, `>`): never user data."""

    text: str


def quote(value: Value) -> str:
    """Quote one value for a POSIX shell; NUL bytes cannot be passed and are refused."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if "\0" in text:
        raise ValueError("a shell argument cannot contain a NUL byte")
    return shlex.quote(text)


looks_secret = is_secret_name
"""Whether an environment variable's name says it holds a secret (decided in orchestrator/secret.py)."""


def mask_env(env: Mapping[str, str], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` with named or secret-looking values replaced by `***`."""
    return masked_names(env, secret_names)


def check_env_name(name: str) -> str:
    """Return `name` if it is a valid shell variable name, else raise ValueError."""
    if not _NAME.match(name):
        raise ValueError(f"not a valid environment variable name: {name!r}")
    return name


class ShellCommand:
    """A shell command built from parts: values quoted, `Raw` verbatim. Secrets never travel on a command line
    (they go over the launch channel's stdin, transport/launch.py), so what it prints is what it sends."""

    __slots__ = ("_raw",)

    def __init__(self, *parts: Part) -> None:
        self._raw = " ".join(_render(part) for part in parts)

    @classmethod
    def assign(cls, name: str, value: Value) -> ShellCommand:
        """One `NAME=value` word (an environment prefix or a shell assignment)."""
        check_env_name(name)
        cmd = cls()
        cmd._raw = f"{name}={_render(value)}"
        return cmd

    def raw(self) -> str:
        """The command as sent to the host."""
        return self._raw

    def __str__(self) -> str:
        return self._raw

    def __repr__(self) -> str:
        return f"ShellCommand({self._raw!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShellCommand) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __add__(self, other: Part) -> ShellCommand:
        return ShellCommand(self, other)


Part = Value | Raw | ShellCommand


def _render(part: Part) -> str:
    if isinstance(part, ShellCommand):
        return part._raw
    if isinstance(part, Raw):
        return part.text
    return quote(part)
