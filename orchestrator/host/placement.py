"""Who picks a launch's GPUs and port: the host's own GPUs, watched with nvidia-smi (LocalGpus), or a batch
scheduler (slurm/placement.py). The host (connection, facts, launcher) is host/session.py; a session holds one
placement, chosen with its launcher in sweep/connect.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Protocol

from orchestrator.errors import HostBusy
from orchestrator.host.facts import (
    GPU_APPS_QUERY,
    GPU_QUERY,
    Gpu,
    GpuHolder,
    GpuProcess,
    NoGpuReading,
    gpu_holders,
    gpu_query_problem,
    host_words,
    parse_driver,
    parse_gpus,
    read_gpu_processes,
)
from orchestrator.host.launcher import Launch
from orchestrator.host.ports import PortSurvey, candidates, parse_survey, pick_free, spaced_from, survey_command
from orchestrator.model import SchedulerEnd
from orchestrator.probe.client import ProbeClient
from orchestrator.transport import HostBreaker
from orchestrator.transport.base import CommandResult
from orchestrator.transport.shell import ShellCommand, quote

if TYPE_CHECKING:
    from orchestrator.host.session import HostSession

GPU_RELEASE_POLL_S = 0.05
PORT_SURVEY_REUSE_S = 5.0
"""A port survey this young is picked from again: a server binds its port only once its weights are loaded, long
after the pick, so a newer look would not make a port safer, and a port another process took meanwhile is a port
race, retried on another one. Only quick cells (simulated, or refused at start) ever meet a survey this young."""
_GPU_AND_DRIVER_QUERY = (
    "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,name,driver_version,compute_cap"
    " --format=csv,noheader,nounits"
)
_LISTENER_SCRIPT = """
import os, sys
port, pgid = int(sys.argv[1]), int(sys.argv[2])
inodes = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        f = row.split()
        if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f[9])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.getpgid(int(pid)) != pgid:
            continue
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] in inodes:
                print("ours"); sys.exit(0)
    except OSError:
        continue
print("foreign" if inodes else "none")
"""
# Arguments: pairs of (pgid, run dir). Prints each pgid whose group is alive and whose leader works in
# that run directory (every launch starts there), so a pgid reused by a stranger is never taken for ours.
# A sweep's groups are nearly all gone: the builtin `kill -s 0` drops those without starting a process, and
# `ps` (a zombie leader passes `kill -s 0`) runs only once some group passes it.
_OURS_ALIVE = """live=
while [ $# -ge 2 ]; do
  pg=$1; run=$2; shift 2
  kill -s 0 -- "-$pg" 2>/dev/null || continue
  [ -n "$live" ] || live=$(ps -eo pgid=,stat= | awk '$2 !~ /^Z/ {print $1}')
  printf '%s\\n' "$live" | grep -qx -- "$pg" || continue
  dir=$(readlink -f -- "$run" 2>/dev/null)
  [ -n "$dir" ] && [ "$(readlink "/proc/$pg/cwd" 2>/dev/null)" = "$dir" ] && echo "$pg"
done
exit 0"""


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """nvidia-smi's list of GPU processes, and when it was asked for (a GPU is never thought free later than it was)."""

    result: CommandResult
    asked: float


class Placement(Protocol):
    """Where a launch runs: which GPUs, which port, and how its server is reached."""

    free_seen: dict[int, float]
    """GPU index -> when (time.monotonic) this placement last saw it hold no process."""

    def facts(self) -> dict[str, str]:
        """The GPUs launches get, as the host or the scheduler describes them."""

    def gpu_problem(self, said: dict[str, str]) -> str | None:
        """Why the GPUs `facts()` described (`said`) cannot take this host's launches, if they cannot."""

    def gpu_uuids(self) -> list[str]:
        """The GPUs this host entry uses, for the machine-wide lock (empty: not ours to lock)."""

    def holders(
        self, our_pgids: set[int], gpus: Collection[int] | None = None, reading: GpuReading | None = None
    ) -> list[GpuHolder]:
        """Processes holding memory on `gpus` (default: any GPU), marked ours when in one of `our_pgids`."""

    def stop(self, launch: Launch, grace_s: float) -> tuple[bool, GpuReading | None]:
        """Stop a launch (True: SIGKILL was needed), with what its GPUs look like once it is gone, if read."""

    def wait_released(
        self, gpus: tuple[int, ...], timeout: float, first: GpuReading | None = None
    ) -> tuple[bool, list[GpuHolder]]:
        """Wait until no process holds `gpus` (`first`: the reading of `stop`); the holders left at `timeout`."""

    def visible_devices(self, gpus: tuple[int, ...]) -> dict[str, str]:
        """The environment that confines a launch to `gpus`."""

    def width(self, jobs: int, max_queued: int | None) -> int:
        """Launches in flight at once when packing `jobs`."""

    def gpus_from_pool(self, tp_size: int) -> int:
        """How many of the GPUs the sweep packs (the host's `gpus:`) a launch of `tp_size` takes."""

    def free_ports(self, count: int, avoid: Collection[int]) -> list[int]:
        """`count` ports for new launches, clear of `avoid`."""

    def port_owner(self, port: int, pgid: int) -> str:
        """Who listens on a launch's port: "ours", "foreign", "none" or "unknown"."""

    def worker_session(self, breaker: HostBreaker | None) -> HostSession:
        """A session to this host for one more worker thread of the sweep, with a placement like this one."""

    def reach(self, launch: Launch, on_wait: Callable[[str], None] | None = None) -> tuple[Launch, ProbeClient]:
        """The launch once it runs where it can be probed (`on_wait`: told each new state while it waits), and an
        HTTP client for its server."""

    def ended(self, launch: Launch, exit_code: int | None, fatal_seen: bool) -> tuple[bool, SchedulerEnd | None]:
        """Whether the launch ended by itself before our stop (`exit_code`: its own, if it left one; `fatal_seen`:
        its log printed a fatal line), and how a batch scheduler ended it, if one did."""

    def end_unfinished(self, launch: Launch, grace_s: float) -> None:
        """End a launch whose watcher is gone (the sweep was interrupted), whoever runs it."""

    def reap(self, finished: list[Launch], grace_s: float) -> list[int]:
        """End what outlived these finished launches (their stop failed); the process groups of ours ended."""

    def abandon(self) -> None:
        """The orchestrator is interrupted: end what only it could end; a launch it can re-attach to runs on."""


class LocalGpus:
    """The host's own GPUs, `gpus:` of them packed by the sweep, each launch confined with CUDA_VISIBLE_DEVICES."""

    def __init__(self, host: HostSession, gpus: list[Gpu] | None = None) -> None:
        self.host = host
        self.gpus: list[Gpu] = gpus if gpus is not None else []
        """GPU index and UUID, as nvidia-smi listed them."""
        self.free_seen: dict[int, float] = {}
        self._survey = (float("-inf"), PortSurvey(frozenset(), (0, 0)))
        """When the host's ports were last surveyed (time.monotonic), and what the survey said."""
        self._handed: set[int] = set()
        self._gpu_answer: str | None = None
        """nvidia-smi's answer to the GPU and driver query that `gpu_uuids` read, for the preflight's `facts`."""

    def facts(self) -> dict[str, str]:
        """GPU model, driver and compute capability, as nvidia-smi says."""
        # One nvidia-smi start for these and the GPUs' index and UUID, which holders() needs next; none at all when
        # the lock's gpu_uuids() just asked (a real nvidia-smi often takes 0.1-0.5 s to start).
        answer, self._gpu_answer = self._gpu_answer, None
        rows = (answer if answer is not None else self.host.sh(_GPU_AND_DRIVER_QUERY, timeout=30).text).splitlines()
        self.gpus = parse_gpus("\n".join(rows))
        info = parse_driver("\n".join(",".join(row.split(",")[4:]) for row in rows))
        info["gpus"] = str(self.host.config.gpus)
        return info

    def gpu_problem(self, said: dict[str, str]) -> str | None:
        """Fewer GPUs than `gpus:` (a launch on one that is not there dies of a CUDA error far from the cause); none
        at all: asked again, to say why (a healthy host pays no extra nvidia-smi start)."""
        name, wanted = self.host.config.name, self.host.config.gpus
        if said.get("gpu_name"):
            if len(self.gpus) >= wanted:
                return None
            return (
                f"hosts.yaml gives host {name} gpus: {wanted}, but nvidia-smi lists {len(self.gpus)} GPU(s) there "
                f"(fix: set gpus: {len(self.gpus)} for host {name} in hosts.yaml)"
            )
        answer = self.host.sh(GPU_QUERY, timeout=30)
        problem = gpu_query_problem(answer.exit_code, answer.text, answer.stderr_text)
        if problem is None and not parse_gpus(answer.text):
            problem = f"nvidia-smi lists no GPU; the host said: {host_words(answer.text.strip()) or '(nothing)'}"
        return problem

    def gpu_uuids(self) -> list[str]:
        """Those of the first `gpus:`; empty when nvidia-smi lists none (a host preflight is about to refuse)."""
        result = self.host.sh(_GPU_AND_DRIVER_QUERY, timeout=30)
        if result.exit_code == 0:
            self._gpu_answer = result.text
        else:  # a driver too old for a field of that query (compute_cap) still names its GPUs
            result = self.host.sh(GPU_QUERY, timeout=30)
            if result.exit_code != 0:
                return []
        self.gpus = parse_gpus(result.text)
        return [g.uuid for g in sorted(self.gpus, key=lambda g: g.index)[: self.host.config.gpus]]

    def holders(
        self, our_pgids: set[int], gpus: Collection[int] | None = None, reading: GpuReading | None = None
    ) -> list[GpuHolder]:
        """`reading`: nvidia-smi's answer already in hand (from `stop`)."""
        # One nvidia-smi per call: it is slow to start (a real one often 0.1-0.5 s), and this runs before
        # and after every launch. The process table is read only when there are holders to tell apart.
        if reading is None:
            asked = time.monotonic()  # taken before the query, so a GPU is never thought free later than it was
            reading = GpuReading(self.host.sh(GPU_APPS_QUERY, timeout=30), asked)
        # No reading (nvidia-smi missing or failing) is never "no holders": NoGpuReading says why.
        procs = read_gpu_processes(reading.result.exit_code, reading.result.text, reading.result.stderr_text)
        known = self._gpu_list(procs)
        found = gpu_holders(known, procs, set())
        busy = {h.gpu_index for h in found}
        for gpu in known:
            if gpu.index not in busy and (gpus is None or gpu.index in gpus):
                self.free_seen[gpu.index] = reading.asked
        if gpus is not None:
            found = [h for h in found if h.gpu_index in gpus]
        if not found or not our_pgids:
            return found
        ours: set[int] = set()
        for row in self.host.sh("ps -eo pid=,pgid=", timeout=30).text.splitlines():
            parts = row.split()
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) in our_pgids:
                ours.add(int(parts[0]))
        return [dataclasses.replace(h, ours=h.pid in ours) for h in found]

    def _gpu_list(self, procs: list[GpuProcess]) -> list[Gpu]:
        # GPU index <-> UUID is fixed while the host is up; read again when a process names a UUID not in it.
        known = {g.uuid for g in self.gpus}
        if not self.gpus or any(p.gpu_uuid not in known for p in procs):
            self.gpus = parse_gpus(self.host.sh(GPU_QUERY, timeout=30).text)
        return self.gpus

    def stop(self, launch: Launch, grace_s: float) -> tuple[bool, GpuReading | None]:
        """Stop the launch's process group and, in the same round trip, read which processes hold GPUs once it is
        gone: the first look of `wait_released`."""
        asked = time.monotonic()
        stopped = self.host.launcher.stop(launch, grace_s, then=self.host.with_env(GPU_APPS_QUERY))
        return stopped.sigkilled, GpuReading(stopped.after, asked) if stopped.after is not None else None

    def wait_released(
        self, gpus: tuple[int, ...], timeout: float, first: GpuReading | None = None
    ) -> tuple[bool, list[GpuHolder]]:
        """`first`: nvidia-smi's answer already in hand. Raises NoGpuReading when nvidia-smi gave no reading until
        the deadline: GPUs whose state is unknown are never called free."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.holders(set(), gpus, first)
            except NoGpuReading:
                if time.monotonic() >= deadline:
                    raise
                found = None
            first = None
            if found == []:
                return True, []
            if found is not None and time.monotonic() >= deadline:
                return False, found
            time.sleep(GPU_RELEASE_POLL_S)

    def visible_devices(self, gpus: tuple[int, ...]) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}

    def width(self, jobs: int, max_queued: int | None) -> int:
        """One launch per GPU at most: the host's `gpus:`."""
        return self.host.config.gpus

    def gpus_from_pool(self, tp_size: int) -> int:
        """All of them: the sweep packs launches onto the host's GPUs."""
        return tp_size

    def free_ports(self, count: int, avoid: Collection[int]) -> list[int]:
        """Ports free on the host, PORT_SPACING apart from each other and from every port in `avoid`.

        The host's sockets are surveyed (one command, tens of ms: every process's command line and socket) unless
        the last survey is under PORT_SURVEY_REUSE_S old and still has the ports asked for.
        """
        grid = candidates(self.host.config.port_base)
        taken, survey = self._survey
        fresh = time.monotonic() - taken < PORT_SURVEY_REUSE_S
        # Never a port handed out since the survey: a server of ours stopped on it may linger (ranks past SIGKILL).
        ports = pick_free(survey, grid, count, {*avoid, *self._handed}) if fresh else []
        if len(ports) < count:
            self._survey = (time.monotonic(), parse_survey(self.host.sh(survey_command(grid), timeout=30).text))
            self._handed = set()
            ports = pick_free(self._survey[1], grid, count, avoid)
        self._handed.update(ports)
        if len(ports) < count:
            among = spaced_from(grid, avoid)
            raise HostBusy(f"only {len(ports)} of {count} ports free on {self.host.config.name} among {among}")
        return ports

    def port_owner(self, port: int, pgid: int) -> str:
        """"ours" when the listener is in the launch's process group."""
        script = quote(_LISTENER_SCRIPT)
        # -S: no site-packages scan; the script needs only the standard library, and it runs for every launch.
        out = self.host.sh(f"{quote(self.host.config.python)} -S -c {script} {port} {pgid}", timeout=30).text.strip()
        return out if out in ("ours", "foreign", "none") else "unknown"

    def reach(self, launch: Launch, on_wait: Callable[[str], None] | None = None) -> tuple[Launch, ProbeClient]:
        """As started (its GPUs and port were picked here, and its process group runs here), on the host's loopback
        (through SSH when the host is remote)."""
        return launch, self.host.probe_client(launch.spec.port, api_key=launch.api_key)

    def worker_session(self, breaker: HostBreaker | None) -> HostSession:
        """Over the host's own connection, a channel per command (sshd allows 10 sessions on one connection, more
        than a host's cells in flight ask at once), knowing the GPUs this placement listed."""
        twin = self.host.sharing_connection()
        twin.placement = LocalGpus(twin, self.gpus)
        return twin

    def ended(self, launch: Launch, exit_code: int | None, fatal_seen: bool) -> tuple[bool, SchedulerEnd | None]:
        """Ended by itself when it left an exit code or no process of its group is left; no scheduler ends ours (a
        group still running after a fatal line is stopped at once)."""
        return exit_code is not None or not self.host.launcher.alive(launch), None

    def end_unfinished(self, launch: Launch, grace_s: float) -> None:
        """Its process group, on this host, once it has one: SIGTERM, SIGKILL after `grace_s`."""
        if launch.pgid:  # 0 is no group of its own: kill(0) would signal the caller's
            self.host.transport.kill_group(launch.pgid, grace_s)

    def reap(self, finished: list[Launch], grace_s: float) -> list[int]:
        """The groups still alive whose leader works in the launch's run directory (a pgid reused by a stranger is
        never taken for ours), each stopped."""
        pairs = [(launch.pgid, launch.spec.run_dir) for launch in finished if launch.pgid]
        if not pairs:
            return []
        words = [word for pgid, run_dir in pairs for word in (pgid, run_dir)]
        out = self.host.transport.run(ShellCommand("sh", "-c", _OURS_ALIVE, "ours-alive", *words).raw(), timeout=60)
        reaped = sorted({int(word) for word in out.text.split() if word.isdigit()})
        for pgid in reaped:
            self.host.transport.kill_group(pgid, grace_s)
        return reaped

    def abandon(self) -> None:
        """Nothing: a launch of ours is a detached process group, which `--resume` re-attaches to or reaps."""
