"""Connecting to a host of hosts.yaml: the launcher and placement its config asks for, chosen in one place."""

from __future__ import annotations

from orchestrator.config.model import HostConfig
from orchestrator.host.session import HostSession
from orchestrator.slurm.placement import place_on_slurm
from orchestrator.transport import HostBreaker


def open_host(config: HostConfig, breaker: HostBreaker | None = None) -> HostSession:
    """A session to the host: a Slurm cluster through its login node (Slurm places each job), else the host itself."""
    return HostSession.open(config, breaker, place_on_slurm if config.transport == "slurm" else None)
