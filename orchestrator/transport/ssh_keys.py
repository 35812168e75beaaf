"""Which keys a connection offers, named for an error message: paths and fingerprints, never key material.

The order is paramiko's (and, for what we configure, OpenSSH's): the configured key files, then the agent's
keys, then the default identity files; `IdentitiesOnly yes` offers only the configured files.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from contextlib import suppress

from orchestrator.errors import ConnectFailed
from orchestrator.transport.ssh_target import ResolvedTarget

DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_dsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
"""The files paramiko looks for when no key file is configured (look_for_keys)."""


def fingerprint(public_line: str) -> str | None:
    """`SHA256:...` of a public key line (`ssh-ed25519 AAAA... comment`), as `ssh-keygen -l` prints it."""
    parts = public_line.split()
    if len(parts) < 2:
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _file_key(path: str) -> str:
    """`path (SHA256:...)` from its .pub next to it; just the path when there is none, or `(missing)`."""
    if not os.path.exists(path):
        return f"{path} (missing)"
    with suppress(OSError, UnicodeDecodeError):
        with open(path + ".pub", encoding="utf-8") as f:
            found = fingerprint(f.readline())
        if found:
            return f"{path} ({found})"
    return path


def _agent_keys() -> list[str]:
    """The agent's keys by fingerprint (and comment, when the agent gives one); none without SSH_AUTH_SOCK."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return []
    import paramiko

    agent = paramiko.Agent()
    try:
        keys = agent.get_keys()
        return [f"agent key {key.fingerprint}" + (f" ({key.comment})" if getattr(key, "comment", "") else "")
                for key in keys]  # fmt: skip
    except Exception:  # an agent that does not answer offers nothing; the error is about the host's refusal
        return []
    finally:
        agent.close()


def keys_offered(target: ResolvedTarget) -> list[str]:
    """What the connection to `target` offers the host, in order, each named without its key material."""
    offered = [_file_key(path) for path in target.key_files]
    if target.identities_only:
        return offered
    offered += _agent_keys()
    if not target.key_files:
        offered += [_file_key(p) for p in map(os.path.expanduser, DEFAULT_IDENTITIES) if os.path.exists(p)]
    return offered


def auth_refused(target: ResolvedTarget, exc: BaseException) -> ConnectFailed:
    """The error for a host that refused every key: which host, which keys, and what to do."""
    offered = keys_offered(target)
    tried = "; ".join(offered) if offered else "no key at all (no key file configured, no agent, no ~/.ssh/id_*)"
    only = " (IdentitiesOnly yes: the agent and the default identities were not offered)"
    only = only if target.identities_only else ""
    needs_passphrase = type(exc).__name__ == "PasswordRequiredException"
    why = "a key file needs a passphrase, which is never asked for" if needs_passphrase else "it refused every key"
    fix = (
        "load that key into ssh-agent (ssh-add FILE)"
        if needs_passphrase
        else f"add the public key to ~{target.user}/.ssh/authorized_keys on {target.hostname}, or point "
        "identity_file (or IdentityFile in the ssh config) at a key it accepts"
    )
    origin = f" [configured at {target.origin}]" if target.origin else ""
    return ConnectFailed(f"{target.describe()}: authentication failed as {target.user}: {why}; tried: {tried}{only}"
                         f"{origin} (fix: {fix})")  # fmt: skip
