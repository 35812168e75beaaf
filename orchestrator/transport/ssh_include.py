"""OpenSSH `Include` for paramiko's SSHConfig, which has none: included files are inlined where they appear.

Globs are expanded in sorted order, as OpenSSH does; relative paths are relative to ~/.ssh for a user's
config (OpenSSH's rule), and a missing file is skipped. An Include inside a Host/Match block applies only
within it in OpenSSH; inlining keeps that, since the included lines sit under the same block header.
"""

from __future__ import annotations

import glob
import os
import re

MAX_DEPTH = 16
"""OpenSSH's own limit on nested Includes."""

_INCLUDE = re.compile(r"^\s*include(?:\s*=\s*|\s+)(?P<paths>.+?)\s*$", re.IGNORECASE)


def config_text(path: str, *, depth: int = 0) -> str:
    """The config file at `path` with every Include replaced by the files it names."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    out: list[str] = []
    for line in lines:
        match = _INCLUDE.match(line)
        if not match or depth >= MAX_DEPTH:
            out.append(line)
            continue
        for pattern in match["paths"].split():
            for found in included_files(pattern.strip('"')):
                out.append(config_text(found, depth=depth + 1))
    return "\n".join(out) + "\n"


def included_files(pattern: str) -> list[str]:
    """The files an `Include PATTERN` names: `~` expanded, relative to ~/.ssh, globbed, sorted."""
    expanded = os.path.expanduser(pattern)
    if not os.path.isabs(expanded):
        expanded = os.path.join(os.path.expanduser("~/.ssh"), expanded)
    return sorted(p for p in glob.glob(expanded) if os.path.isfile(p))
