"""known_hosts read as OpenSSH reads it: host patterns, hashed names, and the `@revoked` and `@cert-authority` markers.

paramiko's own loader knows none of the markers: `@cert-authority host ssh-ed25519 AAAA...` shifts every field by
one, its base64 check fails, and the exception ends every connection (issue 33). Here each line is read on its own;
only the lines that name the host being connected to are handed to paramiko, under the exact name it looks up. A
line that cannot be read is skipped, as OpenSSH skips it.

- `@revoked` keys are never accepted for the hosts the line names, whatever other line lists them.
- `@cert-authority` lines vouch for host certificates signed by their CA (checked in host_certs.py; a host known
  only through its CA is asked for its certificate first).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass, field

import paramiko

log = logging.getLogger(__name__)

REVOKED = "@revoked"
CERT_AUTHORITY = "@cert-authority"


@dataclass(frozen=True)
class KnownLine:
    """One usable line of a known_hosts file."""

    file: str
    line: int
    marker: str | None
    """None for a plain host key, else REVOKED or CERT_AUTHORITY."""
    patterns: tuple[str, ...]
    key: paramiko.PKey

    @property
    def where(self) -> str:
        """`file:line`."""
        return f"{self.file}:{self.line}"


@dataclass
class KnownHosts:
    """What the known_hosts files say about one host name (`host` or `[host]:port`)."""

    name: str
    keys: list[KnownLine] = field(default_factory=list)
    revoked: list[KnownLine] = field(default_factory=list)
    authorities: list[KnownLine] = field(default_factory=list)

    def revoked_line(self, key: paramiko.PKey) -> KnownLine | None:
        """The `@revoked` line that names this host and `key`, if any."""
        return next((k for k in self.revoked if _same_key(k.key, key)), None)

    def usable(self) -> list[KnownLine]:
        """The plain keys of this host that no `@revoked` line takes back."""
        return [k for k in self.keys if self.revoked_line(k.key) is None]


def read_known_hosts(paths: list[str], name: str) -> KnownHosts:
    """Every line of `paths` (missing files are none) that names `name`, sorted by marker."""
    found = KnownHosts(name)
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for number, raw in enumerate(text.splitlines(), 1):
            entry = parse_line(raw, path, number)
            if entry is None or not host_matches(entry.patterns, name):
                continue
            if entry.marker == REVOKED:
                found.revoked.append(entry)
            elif entry.marker == CERT_AUTHORITY:
                found.authorities.append(entry)
            else:
                found.keys.append(entry)
    return found


def parse_line(raw: str, file: str = "", line: int = 0) -> KnownLine | None:
    """One known_hosts line, or None for a comment, a blank line or one that cannot be read."""
    text = raw.strip()
    if not text or text.startswith("#"):
        return None
    marker = None
    if text.startswith("@"):
        marker, _, text = text.partition(" ")
        text = text.strip()
        if marker not in (REVOKED, CERT_AUTHORITY):
            log.info("%s:%d: unknown marker %s; line skipped (as OpenSSH does)", file, line, marker)
            return None
    fields = text.split()
    if len(fields) < 3:
        return None
    patterns, key_type, blob = fields[0], fields[1], fields[2]
    try:
        key = paramiko.PKey.from_type_string(key_type, base64.b64decode(blob, validate=True))
    except Exception as exc:  # an unknown type, bad base64, or a blob that fails deep inside the key classes
        log.info("%s:%d: key not readable (%s: %s); line skipped", file, line, type(exc).__name__, exc)
        return None
    return KnownLine(file, line, marker, tuple(patterns.split(",")), key)


def host_matches(patterns: tuple[str, ...], name: str) -> bool:
    """OpenSSH's host list match: any pattern matches (`*`, `?`, hashed `|1|salt|hmac`) and no `!pattern` does."""
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        hit = _hashed_match(body, name) if body.startswith("|1|") else _glob(body).fullmatch(name.lower()) is not None
        if hit and negated:
            return False
        matched = matched or hit
    return matched


def _glob(pattern: str) -> re.Pattern[str]:
    # Not fnmatch: `[127.0.0.1]:2222` is a literal name here, not a character class.
    return re.compile(re.escape(pattern.lower()).replace(r"\*", ".*").replace(r"\?", "."))


def _hashed_match(pattern: str, name: str) -> bool:
    parts = pattern.split("|")
    if len(parts) != 4:
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.lower().encode(), hashlib.sha1).digest(), digest)


def _same_key(a: paramiko.PKey, b: paramiko.PKey) -> bool:
    return a.asbytes() == b.asbytes()
