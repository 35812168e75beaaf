"""A Slurm cluster as the sweep sees it: a host whose launches are jobs, and a placement where Slurm hands out GPUs.

The transport reaches the login node (over SSH, or this machine when hosts.yaml gives no `ssh:`); the
SGLang facts (`--help`, versions) are read there, from the install on the shared filesystem. What a
single host answers with nvidia-smi and /proc (GPU holders, free ports, who listens) is Slurm's business
or the job's own here: Slurm allocates the GPUs, the job picks its port on its node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from orchestrator.host.facts import GpuHolder
from orchestrator.host.launcher import Launch
from orchestrator.host.placement import GpuReading
from orchestrator.host.ports import candidates
from orchestrator.host.session import HostSession
from orchestrator.model import SchedulerEnd
from orchestrator.probe.client import ProbeClient
from orchestrator.slurm.jobs import SlurmLauncher, watch_for
from orchestrator.transport import HostBreaker
from orchestrator.transport.shell import ShellCommand

SSH_QUEUE_AHEAD = 32
"""Jobs in flight at once through an SSH login node by default: each is watched over a connection of its own,
and hundreds of connections at once would trip the login node's sshd (MaxStartups) and annoy its admins."""
PORT_SLOTS = 24
"""Ports a job tries on its node, PORT_SPACING apart (SGLang's internal ports sit above --port)."""


def job_ports(base: int) -> list[int]:
    """The ports a job of this host may take, from port_base up."""
    return candidates(base)[:PORT_SLOTS]


def place_on_slurm(session: HostSession) -> None:
    """Make `session` (to a `transport: slurm` host's login node) launch jobs, and let Slurm place them."""
    launcher = SlurmLauncher(
        session.transport,
        session.config,
        watch_for(session.config.name),
        job_ports(session.config.port_base),
        exports=lambda: session.exports,
    )
    session.launcher = launcher
    session.placement = SlurmPlacement(session, launcher)


class SlurmPlacement:
    """Slurm picks each job's node and GPUs (none another job holds); the job picks its port on its node."""

    def __init__(self, host: HostSession, launcher: SlurmLauncher) -> None:
        self.host = host
        self.jobs = launcher
        self.partition = launcher.slurm.partition
        self.free_seen: dict[int, float] = {}  # never seen: Slurm vouches for the GPUs it hands out

    def facts(self) -> dict[str, str]:
        """The partition's nodes and GPUs as sinfo reports them, and Slurm's version."""
        sinfo = ShellCommand("sinfo", "-h", "-p", self.partition, "-o", "%N|%G|%T").raw()
        rows = self.host.sh(sinfo, timeout=60).text
        version = self.host.sh("sinfo --version", timeout=60).text.strip()
        nodes = [line.split("|") for line in rows.splitlines() if line.count("|") == 2]
        return {
            "gpus": str(self.host.config.gpus),
            "slurm_partition": self.partition,
            "slurm_nodes": ",".join(sorted({n[0] for n in nodes})),
            "slurm_gres": ",".join(sorted({n[1] for n in nodes})),
            "slurm_version": version.removeprefix("slurm "),
        }

    def gpu_problem(self, said: dict[str, str]) -> str | None:
        """None: sbatch says it when the partition cannot give a job its GPUs."""
        return None

    def gpu_uuids(self) -> list[str]:
        """None: the login node's GPUs (if any) are not the jobs', and Slurm keeps jobs apart."""
        return []

    def holders(
        self, our_pgids: set[int], gpus: Collection[int] | None = None, reading: GpuReading | None = None
    ) -> list[GpuHolder]:
        """None: Slurm hands each job GPUs no other job holds."""
        return []

    def stop(self, launch: Launch, grace_s: float) -> tuple[bool, GpuReading | None]:
        """scancel, and wait until the job left the queue; no reading: the node's GPUs are Slurm's to free."""
        return self.host.launcher.stop(launch, grace_s).sigkilled, None

    def wait_released(
        self, gpus: tuple[int, ...], timeout: float, first: GpuReading | None = None
    ) -> tuple[bool, list[GpuHolder]]:
        """Released once the job left the queue (the launcher's stop waits for that)."""
        return True, []

    def visible_devices(self, gpus: tuple[int, ...]) -> dict[str, str]:
        """Nothing: Slurm sets CUDA_VISIBLE_DEVICES for the GPUs it gives the job."""
        return {}

    def width(self, jobs: int, max_queued: int | None) -> int:
        """Every cell queued at once; through a login node at most SSH_QUEUE_AHEAD (each job in flight holds an SSH
        connection), unless told (--max-queued)."""
        from orchestrator.transport.ssh import SshTransport

        ahead = min(jobs, SSH_QUEUE_AHEAD) if isinstance(self.host.transport, SshTransport) else jobs
        return max(1, min(jobs, max_queued or ahead))

    def gpus_from_pool(self, tp_size: int) -> int:
        """None: Slurm picks each job's node and GPUs, so the sweep packs nothing itself."""
        return 0

    def free_ports(self, count: int, avoid: Collection[int]) -> list[int]:
        """0 for each launch: its job picks a free port on its node."""
        return [0] * count

    def port_owner(self, port: int, pgid: int) -> str:
        """Not knowable from the login node."""
        return "unknown"

    def reach(self, launch: Launch, on_wait: Callable[[str], None] | None = None) -> tuple[Launch, ProbeClient]:
        """Once its job runs and wrote its placement (node, port, GPUs; `on_wait`: told each queue state meanwhile),
        HTTP to the job's node and port: straight from here, or through the login node's SSH channel."""
        placed = self.jobs.placed(launch, on_wait)
        return placed, self.host.probe_client(placed.spec.port, placed.api_key, node=placed.node or "127.0.0.1")

    def worker_session(self, breaker: HostBreaker | None) -> HostSession:
        """A connection of its own: each watches Slurm jobs, and dozens at once would pass the 10 sessions sshd
        allows on one connection."""
        return HostSession.open(self.host.config, breaker, place_on_slurm)

    def ended(self, launch: Launch, exit_code: int | None, fatal_seen: bool) -> tuple[bool, SchedulerEnd | None]:
        """A job that printed a fatal line may still be leaving the queue (its last line may be slurmstepd's): given a
        moment; an end Slurm caused (time limit, preemption, an outside scancel) is then named as Slurm's."""
        alone = exit_code is not None or not self.jobs.alive(launch)
        if not alone and fatal_seen:
            alone = self.jobs.ends_after_fatal(launch)
        return alone, self.jobs.killed_by_scheduler(launch) if alone else None

    def end_unfinished(self, launch: Launch, grace_s: float) -> None:
        """scancel its job, if it has one yet and it is still queued or running (its processes are on a node)."""
        if launch.job_id:
            self.jobs.cancel_leftovers([launch.job_id], grace_s)

    def reap(self, finished: list[Launch], grace_s: float) -> list[int]:
        """The jobs among them still queued (their scancel failed) are cancelled; no process group of ours runs here."""
        self.jobs.cancel_leftovers([launch.job_id for launch in finished if launch.job_id], grace_s)
        return []

    def abandon(self) -> None:
        """Cancel every job this process submitted and has not seen end; the attempts still watching one stop."""
        self.jobs.abandon()
