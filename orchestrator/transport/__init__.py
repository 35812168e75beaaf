"""The transport seam: drive a host over SSH or locally through one contract (see base.Transport).

Importing this package does not import paramiko; only opening an SSH transport does.
"""

from __future__ import annotations

from typing import Literal

from orchestrator.transport.base import CommandResult, Transport, map_transport_errors
from orchestrator.transport.breaker import HostBreaker, HostDown
from orchestrator.transport.local import LocalTransport
from orchestrator.transport.shell import Raw, ShellCommand, looks_secret, mask_env, quote
from orchestrator.transport.ssh_target import SshTarget

__all__ = [
    "CommandResult",
    "HostBreaker",
    "HostDown",
    "LocalTransport",
    "Raw",
    "ShellCommand",
    "SshTarget",
    "Transport",
    "looks_secret",
    "map_transport_errors",
    "mask_env",
    "open_transport",
    "quote",
]


def open_transport(spec: Literal["local"] | SshTarget, breaker: HostBreaker | None = None) -> Transport:
    """A transport for `spec`: "local" for this machine, or an SshTarget (connected lazily).

    `breaker` is shared by the connections of one sweep to one host (SSH only: this machine never goes away).
    """
    if spec == "local":
        return LocalTransport()
    if isinstance(spec, SshTarget):
        from orchestrator.transport.ssh import SshTransport  # paramiko only when SSH is used

        return SshTransport(spec, breaker=breaker)
    raise ValueError(f"not a transport spec: {spec!r} (want 'local' or an SshTarget)")
