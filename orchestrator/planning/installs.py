"""Pure: what changed in a host's installs since a sweep recorded them (a resume refuses to mix two installs)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InstallChange:
    """One way the host's installs differ from what a sweep recorded of them."""

    key: str
    """As the sweep's versions name it: `sglang`, `sglang-build[after]`, `torch`."""
    recorded: str | None
    now: str | None

    def __str__(self) -> str:
        return f"{self.key} {self.recorded or 'unknown'} -> {self.now or 'unknown'}"


RECORDED_SINCE_BUILDS = re.compile(r"^sglang-(build|commit)(\[[^\]]+\])?$")
"""Keys preflight records since builds are: a sweep recorded before them (or on a host that could not say) says
nothing about them."""


def install_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[InstallChange]:
    """What changed in the host's installs since a sweep recorded them (its `versions`, against preflight's now).

    Pure. Every key counts (SGLang's version, build and commit, and the watched packages, per install): a
    package installed or removed since is a change too. A build or commit the sweep did not record is not,
    as that sweep was recorded before builds were; one it recorded that the host cannot say now is.
    """
    changes = []
    for key in sorted(set(recorded) | set(current)):
        then, now = recorded.get(key), current.get(key)
        if then is None and RECORDED_SINCE_BUILDS.match(key):
            continue
        if (str(then) if then is not None else None) != (str(now) if now is not None else None):
            changes.append(InstallChange(key, None if then is None else str(then), None if now is None else str(now)))
    return changes
