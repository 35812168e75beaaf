"""Flags whose value is a secret (`--api-key`): a clear-text value is turned into a secret, with a warning.

The value then travels as a `SecretRef` holding it in memory: over the launch channel's stdin, never
in `cmd.sh`, the store or a report. Writing `api-key: {secret: ORCH_API_KEY}` keeps it out of the
matrix file too, and lets `repro` and `--resume` read it again from the environment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from orchestrator.model import AxisValue, FlagValue
from orchestrator.secret import SecretRef, is_secret_name, var_for_flag

log = logging.getLogger("orchestrator")


def protect(name: str, value: FlagValue, where: str, warn: Callable[[str], None] | None = None) -> FlagValue:
    """The value, or a SecretRef holding it when `name` is a secret flag given in clear text."""
    if isinstance(value, (bool, SecretRef)) or not isinstance(value, (str, int, float)) or not is_secret_name(name):
        return value
    var = var_for_flag(name)
    (warn or log.warning)(
        f"{where}: --{name.lstrip('-')} is given in clear text; it is passed as a secret (over the launch's stdin, "
        f"masked everywhere). Write `{name.lstrip('-')}: {{secret: {var}}}` (or `{{secret:{var}}}` after --) and "
        f"export {var}, so that the file holds no secret and repro and --resume can read it again."
    )
    return SecretRef(var, str(value))


def protect_flags(flags: Mapping[str, FlagValue], where: Callable[[str], str]) -> dict[str, FlagValue]:
    """Every flag of a set, clear-text secrets turned into SecretRefs; `where(name)` says where each was given."""
    return {name: protect(name, value, where(name)) for name, value in flags.items()}


def protect_entry(entry: Mapping[str, AxisValue], where: Callable[[str], str]) -> dict[str, AxisValue]:
    """An axis value or include entry, each flag of a bundle protected as a flag given alone would be."""
    return {
        name: protect_flags(value, where) if isinstance(value, dict) else protect(name, value, where(name))
        for name, value in entry.items()
    }
