"""A Slurm cluster as the sweep sees it: a host whose launches are jobs and whose GPUs Slurm hands out.

The transport reaches the login node (over SSH, or this machine when hosts.yaml gives no `ssh:`); the
SGLang facts (`--help`, versions) are read there, from the install on the shared filesystem. What a
single host answers with nvidia-smi and /proc (GPU holders, free ports, who listens) is Slurm's business
or the job's own here: Slurm allocates the GPUs, the job picks its port on its node.
"""

from __future__ import annotations

import httpx

from orchestrator.config.model import HostConfig
from orchestrator.host import facts
from orchestrator.host.launcher import Launch
from orchestrator.host.ports import candidates
from orchestrator.host.session import GpuReading, HostSession
from orchestrator.probe.client import ProbeClient
from orchestrator.slurm.jobs import SlurmLauncher, watch_for
from orchestrator.transport.base import Transport
from orchestrator.transport.breaker import HostBreaker
from orchestrator.transport.shell import ShellCommand, quote

SSH_QUEUE_AHEAD = 32
"""Jobs in flight at once through an SSH login node by default: each is watched over a connection of its own,
and hundreds of connections at once would trip the login node's sshd (MaxStartups) and annoy its admins."""
PORT_SLOTS = 24
"""Ports a job tries on its node, PORT_SPACING apart (SGLang's internal ports sit above --port)."""


def job_ports(base: int) -> list[int]:
    """The ports a job of this host may take, from port_base up."""
    return candidates(base)[:PORT_SLOTS]


class SlurmSession(HostSession):
    """A host with `transport: slurm`."""

    schedules_gpus = True

    def __init__(self, config: HostConfig, transport: Transport):
        super().__init__(config, transport)
        ports = job_ports(config.port_base)
        self.launcher: SlurmLauncher = SlurmLauncher(
            transport, config, watch_for(config.name), ports, exports=lambda: self.exports
        )

    def for_worker(self, breaker: HostBreaker | None = None) -> HostSession:
        """A session of its own connection: each job is watched over its own (see SSH_QUEUE_AHEAD), and dozens of
        jobs watched at once would pass the 10 sessions sshd allows on one connection."""
        return SlurmSession.open(self.config, breaker)

    @property
    def exports(self) -> str:
        """The host's plain environment as `export` commands (what `sh` prefixes every command with)."""
        return "".join(f"export {k}={quote(v)}; " for k, v in sorted(self.base_env.items()))

    def host_facts(self) -> dict[str, str]:
        """The partition's nodes and GPUs as sinfo reports them, and Slurm's version."""
        partition = self.launcher.slurm.partition
        rows = self.sh(ShellCommand("sinfo", "-h", "-p", partition, "-o", "%N|%G|%T").raw(), timeout=60).text
        version = self.sh("sinfo --version", timeout=60).text.strip()
        nodes = [line.split("|") for line in rows.splitlines() if line.count("|") == 2]
        return {
            "gpus": str(self.config.gpus),
            "slurm_partition": partition,
            "slurm_nodes": ",".join(sorted({n[0] for n in nodes})),
            "slurm_gres": ",".join(sorted({n[1] for n in nodes})),
            "slurm_version": version.removeprefix("slurm "),
        }

    def gpu_holders(
        self, our_pgids: set[int], gpus: object = None, reading: GpuReading | None = None
    ) -> list[facts.GpuHolder]:
        """None: Slurm hands each job GPUs no other job holds."""
        return []

    def wait_gpus_released(
        self, gpus: tuple[int, ...], timeout: float, first: GpuReading | None = None
    ) -> tuple[bool, list[facts.GpuHolder]]:
        """Released once the job left the queue (stop waits for that)."""
        return True, []

    def port_owner(self, port: int, pgid: int) -> str:
        """Not knowable from the login node."""
        return "unknown"

    def free_ports(self, count: int, avoid: object) -> list[int]:
        """0 for each launch: its job picks a free port on its node."""
        return [0] * count

    def queue_ahead(self, jobs: int) -> int:
        """Every cell; through a login node at most SSH_QUEUE_AHEAD (each job in flight holds an SSH connection)."""
        from orchestrator.transport.ssh import SshTransport

        return min(jobs, SSH_QUEUE_AHEAD) if isinstance(self.transport, SshTransport) else jobs

    def launch_client(self, launch: Launch) -> ProbeClient:
        """HTTP to the job's node and port: straight from here, or through the login node's SSH channel."""
        from orchestrator.transport.ssh import SshTransport
        from orchestrator.transport.tunnel import TunnelTransport

        http: httpx.BaseTransport
        if isinstance(self.transport, SshTransport):
            http = TunnelTransport(self.transport.open_channel)
        else:
            http = httpx.HTTPTransport(verify=False)
        url = f"http://{launch.node or '127.0.0.1'}:{launch.spec.port}"
        return ProbeClient(url, transport=http, api_key=launch.api_key)
