"""Host key checking: known_hosts loaded, unknown keys refused (or added on explicit opt-in), changed keys refused.

Fabric 3 loads no known_hosts and auto-adds every key, so this replaces its policy entirely
(pyinfra maps StrictHostKeyChecking the same way; SkyPilot's `StrictHostKeyChecking=no` is what
we avoid).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os

import paramiko

from orchestrator.errors import HostKeyRejected
from orchestrator.transport.ssh_target import ResolvedTarget

SYSTEM_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")

log = logging.getLogger(__name__)


def fingerprint(key: paramiko.PKey) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it (`SHA256:...`)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def apply_host_key_policy(client: paramiko.SSHClient, target: ResolvedTarget) -> None:
    """Load system and user known_hosts into `client` and install the refuse / accept-new policy."""
    for path in SYSTEM_KNOWN_HOSTS:
        if os.path.isfile(path):
            client.load_system_host_keys(path)
    if os.path.isfile(target.known_hosts):
        client.load_host_keys(target.known_hosts)
    policy = _AcceptNew(target) if target.accept_new_host_keys else _Refuse(target)
    client.set_missing_host_key_policy(policy)


def unknown_key_error(target: ResolvedTarget, key: paramiko.PKey) -> HostKeyRejected:
    """The refusal of a key that no known_hosts file lists, with how to accept it deliberately."""
    return HostKeyRejected(
        f"{target.describe()}: host key {key.get_name()} {fingerprint(key)} for {target.known_hosts_name} "
        f"is not in {target.known_hosts}; nothing was sent to the host. To trust it, first check the "
        f"fingerprint on the host itself (`ssh-keygen -lf /etc/ssh/ssh_host_{_short(key)}_key.pub`), then run "
        f"`ssh-keyscan -p {target.port} {target.hostname} >> {target.known_hosts}`, or set "
        f"`accept_new_host_keys: true` for this host in hosts.yaml (adds unknown keys to known_hosts; "
        f"a changed key is still refused)."
    )


def changed_key_error(target: ResolvedTarget, exc: paramiko.BadHostKeyException) -> HostKeyRejected:
    """The refusal of a key that differs from the one known_hosts holds; accept_new never overrides it."""
    return HostKeyRejected(
        f"{target.describe()}: host key for {target.known_hosts_name} CHANGED: the host offered "
        f"{exc.key.get_name()} {fingerprint(exc.key)} but known_hosts has {exc.expected_key.get_name()} "
        f"{fingerprint(exc.expected_key)}. Someone may be intercepting the connection, or the host was "
        f"reinstalled; nothing was sent to it. If the change is expected and the new fingerprint checks out, "
        f"run `ssh-keygen -R '{target.known_hosts_name}' -f {target.known_hosts}` and then "
        f"`ssh-keyscan -p {target.port} {target.hostname} >> {target.known_hosts}` "
        f"(accept_new_host_keys does not override a changed key)."
    )


def _short(key: paramiko.PKey) -> str:
    name = key.get_name()
    return "ed25519" if "ed25519" in name else "ecdsa" if "ecdsa" in name else "rsa"


class _Refuse(paramiko.MissingHostKeyPolicy):
    def __init__(self, target: ResolvedTarget) -> None:
        self.target = target

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise unknown_key_error(self.target, key)


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """OpenSSH's `StrictHostKeyChecking accept-new`: paramiko only calls it for keys it knows nothing of."""

    def __init__(self, target: ResolvedTarget) -> None:
        self.target = target

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        path = self.target.known_hosts
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        # Appended, as OpenSSH does: rewriting the file (paramiko's save_host_keys) drops its comments.
        with open(path, "a", encoding="ascii") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("added %s host key %s for %s to %s", key.get_name(), fingerprint(key), hostname, path)
