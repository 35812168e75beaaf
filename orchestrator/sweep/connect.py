"""Connecting to a host of hosts.yaml: the kind of session its config asks for, chosen in one place."""

from __future__ import annotations

from orchestrator.config.model import HostConfig
from orchestrator.host.session import HostSession
from orchestrator.slurm.session import SlurmSession
from orchestrator.transport import HostBreaker


def open_host(config: HostConfig, breaker: HostBreaker | None = None) -> HostSession:
    """A session to the host: a Slurm cluster through its login node (Slurm places each job), else the host itself."""
    kind = SlurmSession if config.transport == "slurm" else HostSession
    return kind.open(config, breaker)
