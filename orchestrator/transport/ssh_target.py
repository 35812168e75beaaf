"""Where an SSH transport connects: a target as hosts.yaml gives it, resolved through ~/.ssh/config."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Any

DEFAULT_PORT = 22
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


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
    proxy_command: str | None = None
    """The config's ProxyCommand, tokens expanded: its stdin/stdout is the connection's socket."""

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

            found = paramiko.SSHConfig.from_path(path).lookup(target.host)
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
        key_files=tuple(os.path.expanduser(k) for k in key_files),
        known_hosts=os.path.expanduser(known_hosts),
        # `StrictHostKeyChecking accept-new` is the config file's way to opt in; changed keys stay refused.
        accept_new_host_keys=target.accept_new_host_keys
        or str(found.get("stricthostkeychecking", "")).lower() == "accept-new",
        connect_timeout=float(found.get("connecttimeout", target.connect_timeout)),
        proxy_command=_proxy_command(found.get("proxycommand")),
    )


def _proxy_command(value: object) -> str | None:
    """ProxyCommand as paramiko's lookup expanded it (%h %p %r), or None for absent or `none`."""
    text = str(value).strip() if value else ""
    return text if text and text.lower() != "none" else None
