"""Host key checking: known_hosts loaded, unknown keys refused (or added on explicit opt-in), changed and revoked
keys refused.

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
from orchestrator.transport.host_certs import check_host_certificate, is_certificate
from orchestrator.transport.known_hosts import KnownHosts, KnownLine, read_known_hosts
from orchestrator.transport.ssh_target import ResolvedTarget

SYSTEM_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
"""Read at call time (tests point it elsewhere)."""

log = logging.getLogger(__name__)


def fingerprint(key: paramiko.PKey) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it (`SHA256:...`)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def known_hosts_of(target: ResolvedTarget) -> KnownHosts:
    """What the system and user known_hosts files say about `target` (markers included)."""
    return read_known_hosts([*SYSTEM_KNOWN_HOSTS, target.known_hosts], target.known_hosts_name)


def apply_host_key_policy(client: paramiko.SSHClient, target: ResolvedTarget) -> bool:
    """Load what known_hosts says about `target` into `client` and install the refuse / accept-new policy.

    True when the host is known only through a CA: the connection should then ask for its certificate first.
    """
    known = known_hosts_of(target)
    for line in known.usable():
        # Under the exact name paramiko looks up: it matches neither patterns nor `@` markers itself.
        client.get_host_keys().add(target.known_hosts_name, line.key.get_name(), line.key)
    policy = _AcceptNew(target, known) if target.accept_new_host_keys else _Refuse(target, known)
    client.set_missing_host_key_policy(policy)
    return bool(known.authorities) and not known.usable()


def unknown_key_error(target: ResolvedTarget, key: paramiko.PKey, known: KnownHosts | None = None) -> HostKeyRejected:
    """The refusal of a key that no known_hosts file lists, with how to accept it deliberately."""
    scan = f"`ssh-keyscan -p {target.port} {target.hostname} >> {target.known_hosts}`"
    if target.jump_for:
        # hosts.yaml's accept_new_host_keys is the GPU host's; the bastion's key is trusted on its own terms.
        opt_in = (
            f"; this is the ProxyJump bastion on the way to {target.jump_for}, which hosts.yaml's "
            f"accept_new_host_keys does not cover: alternatively put `StrictHostKeyChecking accept-new` under "
            f"the bastion's `Host {target.alias}` entry in {target.ssh_config_path or '~/.ssh/config'}"
        )
    elif target.accept_new_host_keys:
        opt_in = ""
    else:
        opt_in = (
            ", or set `accept_new_host_keys: true` for this host in hosts.yaml (adds unknown keys to known_hosts; "
            "a changed key is still refused)"
        )
    authorities = known.authorities if known is not None else []
    ca = (
        f" {_lines(authorities)} trusts a certificate authority for this host, but the host offered no certificate "
        "(sshd's HostCertificate): sign its key with that CA, or list its plain key."
        if authorities
        else ""
    )
    return HostKeyRejected(
        f"{target.describe()}: host key {key.get_name()} {fingerprint(key)} for {target.known_hosts_name} "
        f"is not in {target.known_hosts}; nothing was sent to the host.{ca} To trust it, first check the "
        f"fingerprint on the host itself (`ssh-keygen -lf /etc/ssh/ssh_host_{_short(key)}_key.pub`), then run "
        f"{scan}{opt_in}."
    )


def revoked_key_error(target: ResolvedTarget, key: paramiko.PKey, line: KnownLine) -> HostKeyRejected:
    """The refusal of a key a `@revoked` line names: never accepted, whatever else lists it."""
    return HostKeyRejected(
        f"{target.describe()}: host key {key.get_name()} {fingerprint(key)} for {target.known_hosts_name} "
        f"is REVOKED ({line.where} marks it @revoked); nothing was sent to the host. A revoked key is never "
        f"accepted: have the host's administrator install a new host key, then list that key in "
        f"{target.known_hosts} (accept_new_host_keys does not override a revoked key)."
    )


def refused_key_error(target: ResolvedTarget, exc: paramiko.BadHostKeyException) -> HostKeyRejected:
    """The refusal of a key that differs from the one known_hosts holds: revoked, or changed."""
    revoked = known_hosts_of(target).revoked_line(exc.key)
    return revoked_key_error(target, exc.key, revoked) if revoked else changed_key_error(target, exc)


def certificate_error(target: ResolvedTarget, key: paramiko.PKey, reason: str) -> HostKeyRejected:
    """The refusal of a host certificate that no trusted CA vouches for as this host's."""
    return HostKeyRejected(
        f"{target.describe()}: host certificate for {target.known_hosts_name} (key {key.get_name()} "
        f"{fingerprint(key)}) refused: {reason}; nothing was sent to the host. Fix the certificate on the host "
        f"(`ssh-keygen -s CA_KEY -h -n {target.hostname} ...`), or list the host's plain key in {target.known_hosts}."
    )


def _lines(lines: list[KnownLine]) -> str:
    return ", ".join(line.where for line in lines)


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
    def __init__(self, target: ResolvedTarget, known: KnownHosts) -> None:
        self.target = target
        self.known = known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.vouched(key):
            return
        raise unknown_key_error(self.target, key, self.known)

    def vouched(self, key: paramiko.PKey) -> bool:
        """True for a certificate a trusted CA signed for this host; a revoked key or a bad certificate raises."""
        revoked = self.known.revoked_line(key)
        if revoked is not None:
            raise revoked_key_error(self.target, key, revoked)
        if not is_certificate(key):
            return False
        found = check_host_certificate(key, self.target.hostname, self.known)
        if isinstance(found, str):
            raise certificate_error(self.target, key, found)
        log.info("%s: host certificate signed by the CA of %s", self.target.describe(), found.where)
        return True


class _AcceptNew(_Refuse):
    """OpenSSH's `StrictHostKeyChecking accept-new`: paramiko only calls it for keys it knows nothing of."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.vouched(key):
            return  # a certificate is trusted through its CA, never added as the host's own key (as OpenSSH)
        path = self.target.known_hosts
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        # Appended, as OpenSSH does: rewriting the file (paramiko's save_host_keys) drops its comments.
        with open(path, "a", encoding="ascii") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("added %s host key %s for %s to %s", key.get_name(), fingerprint(key), hostname, path)
