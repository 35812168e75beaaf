"""Why a connection could not be opened, in words: what was tried, what the host (or the network) said, the fix.

A refused port, an unknown name, a missing key file or a silent port otherwise reach the user as paramiko's or
the socket library's own text ("No existing session", "[Errno -2] Name or service not known").
"""

from __future__ import annotations

import errno
import socket
from typing import Any

import paramiko

from orchestrator.errors import ConnectFailed
from orchestrator.transport.ssh_target import ResolvedTarget


def connect_error(t: ResolvedTarget, exc: BaseException, transport: Any = None) -> ConnectFailed | None:
    """The ConnectFailed that explains `exc` raised while connecting to `t` (None: no better words for it).

    `transport` is the paramiko Transport of the failed attempt, if it got that far (it tells whether the host
    ever sent an SSH banner).
    """
    where = f"{t.hostname} port {t.port}"
    config = t.ssh_config_path or "~/.ssh/config"
    port_fix = f"`ssh: {t.user}@{t.hostname}:PORT` in hosts.yaml, or `Port` in {config}"
    if isinstance(exc, socket.gaierror):
        said = exc.strerror or str(exc)
        fix = (
            f"check the spelling of the host in hosts.yaml's `ssh:`; an alias must be a `Host` entry of {config}; "
            f"`getent hosts {t.hostname}` on this machine should print its address"
        )
        return _failed(t, f"cannot resolve the host name {t.hostname!r} ({said})", fix)
    if isinstance(exc, ConnectionRefusedError):
        fix = f"start sshd on the host, or give the port its sshd listens on: {port_fix}"
        return _failed(t, f"connection refused by {where} (nothing listens there)", fix)
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        fix = "check the address in hosts.yaml (or HostName in the ssh config), or reach the host through a bastion"
        return _failed(t, f"no route to {t.hostname} ({exc.strerror})", fix)
    if isinstance(exc, TimeoutError) and transport is None:
        fix = f"check that the host is up and that no firewall drops port {t.port}; ConnectTimeout in {config} "
        fix += "sets how long to wait"
        return _failed(t, f"no answer from {where} within {t.connect_timeout:g} s", fix)
    if isinstance(exc, (FileNotFoundError, PermissionError)) and exc.filename in t.key_files:
        problem = "does not exist" if isinstance(exc, FileNotFoundError) else "cannot be read (permission denied)"
        fix = f"point identity_file in hosts.yaml (or IdentityFile in {config}) at your private key"
        return _failed(t, f"the key file {exc.filename} {problem}", fix)
    if isinstance(exc, paramiko.ChannelException) and t.proxy_jump:
        bastion = t.proxy_jump[-1]
        said = exc.text or f"error {exc.code}"
        fix = f"check HostName and Port of this host as the bastion sees them, in {config}; try `ssh -J {bastion} ...`"
        return _failed(t, f"the bastion {bastion} could not connect to {where}: it said {said!r}", fix)
    if isinstance(exc, paramiko.SSHException) and transport is not None and not transport.remote_version:
        fix = (
            f"check that {where} is an sshd (not another service) and that the host is not overloaded "
            f"(sshd's MaxStartups); {port_fix}"
        )
        return _failed(t, f"{where} accepted the connection but sent no SSH banner within {t.connect_timeout:g} s", fix)
    return None


def _failed(t: ResolvedTarget, problem: str, fix: str) -> ConnectFailed:
    origin = f" [configured at {t.origin}]" if t.origin else ""
    text = f"{t.describe()}: cannot connect: {problem}{origin}; nothing was sent to the host (fix: {fix})"
    return ConnectFailed(text)
