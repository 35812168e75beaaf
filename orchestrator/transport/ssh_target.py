"""Where an SSH transport connects: a target as hosts.yaml gives it, resolved through ~/.ssh/config."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Any

from orchestrator.transport.ssh_include import config_text

DEFAULT_PORT = 22
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"

_ORIGINS: dict[tuple[str, int | None, str | None], str] = {}
"""(host, port, user) as hosts.yaml gives them -> where: `FILE:LINE (host NAME)`, for the errors of a connection."""


def note_origin(host: str, port: int | None, user: str | None, origin: str) -> None:
    """Remember where a target was configured (hosts.yaml's loader calls it), so that its errors can say so."""
    _ORIGINS[(host, port, user)] = origin


@dataclass(frozen=True)
class SshTarget:
    """An SSH host as configured; `host` may be an alias from the ssh config file.

    Explicit fields win over the ssh config (HostName, Port, User, IdentityFile,
    UserKnownHostsFile). Unknown host keys are refused unless `accept_new_host_keys` is set;
    changed keys are always refused.
    """

    host: str
    port: int | None = None
    user: str | None = None
    key_filename: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False
    ssh_config_path: str | None = "~/.ssh/config"
    connect_timeout: float = 10.0
    proxy_jump: str | None = None
    """Overrides the config's ProxyJump (`a,b`; "" for none); None reads the config."""
    jump_for: str | None = None
    """Set on a ProxyJump bastion: the host it leads to (`ssh user@host:port`), for its error messages."""


@dataclass(frozen=True)
class ResolvedTarget:
    """A target with the ssh config applied: exactly what the connection uses."""

    alias: str
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: str
    accept_new_host_keys: bool
    connect_timeout: float
    identities_only: bool = False
    """`IdentitiesOnly yes`: only the configured key files, no agent, no default identities."""
    proxy_command: str | None = None
    """The config's ProxyCommand, tokens expanded: its stdin/stdout is the connection's socket."""
    proxy_jump: tuple[str, ...] = ()
    """Jump hosts in order (`[user@]host[:port]` or aliases); the last one forwards to this host."""
    ssh_config_path: str | None = None
    jump_for: str | None = None
    """Set on a ProxyJump bastion: the host it leads to."""
    origin: str | None = None
    """Where hosts.yaml configures this target (`FILE:LINE (host NAME)`), when it does."""

    @property
    def known_hosts_name(self) -> str:
        """The host's name as known_hosts spells it (`[host]:port` unless the port is 22)."""
        return self.hostname if self.port == DEFAULT_PORT else f"[{self.hostname}]:{self.port}"

    def describe(self) -> str:
        """`ssh user@host:port`, with the alias first when it differs from the host name."""
        where = f"{self.user}@{self.hostname}:{self.port}"
        return f"ssh {where}" if self.alias == self.hostname else f"ssh {self.alias} ({where})"


def resolve(target: SshTarget) -> ResolvedTarget:
    """Apply the ssh config file (if any) to `target`."""
    found: dict[str, Any] = {}
    if target.ssh_config_path:
        path = os.path.expanduser(target.ssh_config_path)
        if os.path.isfile(path):
            import paramiko  # here, not at the top: building an SshTarget must not cost paramiko's import

            found = paramiko.SSHConfig.from_text(config_text(path)).lookup(target.host)
    identity = found.get("identityfile") or []
    key_files = (target.key_filename,) if target.key_filename else tuple(identity)
    # UserKnownHostsFile may list several files; the first is the one OpenSSH adds new keys to.
    config_known = str(found.get("userknownhostsfile", "")).split()
    known_hosts = target.known_hosts or (config_known[0] if config_known else DEFAULT_KNOWN_HOSTS)
    return ResolvedTarget(
        alias=target.host,
        hostname=str(found.get("hostname", target.host)),
        port=int(target.port or found.get("port", DEFAULT_PORT)),
        user=target.user or str(found.get("user", "")) or getpass.getuser(),
        key_files=tuple(dict.fromkeys(os.path.expanduser(k) for k in key_files)),  # OpenSSH drops repeats
        known_hosts=os.path.expanduser(known_hosts),
        # `StrictHostKeyChecking accept-new` is the config file's way to opt in; changed keys stay refused.
        accept_new_host_keys=target.accept_new_host_keys
        or str(found.get("stricthostkeychecking", "")).lower() == "accept-new",
        connect_timeout=float(found.get("connecttimeout", target.connect_timeout)),
        identities_only=str(found.get("identitiesonly", "")).lower() == "yes",
        proxy_command=_proxy_command(found.get("proxycommand")),
        proxy_jump=_proxy_jump(target.proxy_jump if target.proxy_jump is not None else found.get("proxyjump")),
        ssh_config_path=target.ssh_config_path,
        jump_for=target.jump_for,
        origin=_ORIGINS.get((target.host, target.port, target.user)),
    )


def _proxy_command(value: object) -> str | None:
    """ProxyCommand as paramiko's lookup expanded it (%h %p %r), or None for absent or `none`."""
    text = str(value).strip() if value else ""
    return text if text and text.lower() != "none" else None


def _proxy_jump(value: object) -> tuple[str, ...]:
    """`a,b` as a tuple of hops; absent or `none` is no hop."""
    text = str(value).strip() if value else ""
    if not text or text.lower() == "none":
        return ()
    return tuple(hop.strip() for hop in text.split(",") if hop.strip())


def jump_target(target: ResolvedTarget) -> SshTarget:
    """The last jump host of `target`, itself reached through the hops before it (as `ssh -J a,b` does)."""
    *before, last = target.proxy_jump
    user, _, rest = last.rpartition("@")
    host, _, port = rest.partition(":")
    return SshTarget(
        host,
        port=int(port) if port else None,
        user=user or None,
        ssh_config_path=target.ssh_config_path,
        connect_timeout=target.connect_timeout,
        proxy_jump=",".join(before) if before else None,
        jump_for=target.jump_for or target.describe(),
    )
