"""One Slurm job per run: the job script, sbatch, waiting for RUNNING, liveness, the end state, scancel.

The run directory (on the filesystem the login node and the compute nodes share) is the truth about a
job as it is about a local launch: `job.sh` (what sbatch ran), `cmd.sh` (the server alone, for humans),
`job_id`, `server.log` (the job's --output) and `placement` (node, port, GPUs: written by the job on its
node before it execs the server). Every job is named `orch-<run_id>`, so a job submitted just before a
crash, before its id reached the store or `job_id`, is found again by name: resume never submits twice.

Every thread waiting on a job of a host reads one shared `squeue`, asked at most every POLL_S.
"""

from __future__ import annotations

import dataclasses
import posixpath
import threading
import time
from collections.abc import Callable, Mapping

from orchestrator.config.model import HostConfig
from orchestrator.errors import LaunchError, TransportError
from orchestrator.host.launcher import Launch, Launcher, LaunchSpec, Stopped, api_key_of
from orchestrator.model import SchedulerEnd
from orchestrator.slurm.commands import (
    KILLED_STATES,
    JobInfo,
    Submission,
    job_name,
    killed_reason,
    parse_sbatch,
    parse_scontrol,
    parse_squeue,
    scancel_command,
    scontrol_command,
    secrets_stdin,
    squeue_command,
)
from orchestrator.slurm.script import parse_placement, render_job_sh
from orchestrator.transport.base import CommandResult, Transport

POLL_S = 0.5
"""How often squeue is asked while jobs are waited on (one command for all of them)."""
CANCEL_WAIT_S = 60.0
"""How long a cancelled job may take to leave the queue (Slurm's KillWait and epilog included)."""
PLACEMENT_WAIT_S = 60.0
"""How long a RUNNING job may take to write its placement (node, port) before it counts as broken."""
SBATCH_TIMEOUT_S = 60.0
SCHEDULER_END_WAIT_S = 10.0
"""How long a job that printed a fatal line is given to leave the queue before it is stopped."""


class Abandoned(KeyboardInterrupt):
    """The orchestrator was interrupted and cancelled its jobs: the attempts end without a verdict (resume reruns)."""


class JobWatch:
    """The jobs of one host this process waits on, their last squeue reading, and those it submitted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tracked: set[str] = set()
        self._seen: dict[str, JobInfo] = {}
        self._asked = float("-inf")
        self.submitted: set[str] = set()
        """Jobs this process submitted or re-attached to and has not seen end: what an interrupt cancels."""
        self.cancelled_by_us: set[str] = set()
        self.aborting = False

    def track(self, job_id: str) -> None:
        """Follow a job (submitted or re-attached)."""
        with self._lock:
            self._tracked.add(job_id)
            self.submitted.add(job_id)
            self._asked = float("-inf")

    def forget(self, job_id: str) -> None:
        """The job is over: stop asking about it."""
        with self._lock:
            self._tracked.discard(job_id)
            self.submitted.discard(job_id)
            self._seen.pop(job_id, None)

    def get(self, run: Callable[[str], CommandResult], job_id: str, fresh: bool = False) -> JobInfo | None:
        """The job as squeue shows it now (at most POLL_S old), None when it is not in the queue."""
        if self.aborting:
            raise Abandoned()
        with self._lock:
            if fresh or time.monotonic() - self._asked >= POLL_S or job_id not in self._tracked:
                self._tracked.add(job_id)
                result = run(squeue_command(self._tracked))
                self._seen = parse_squeue(result)
                self._asked = time.monotonic()
            return self._seen.get(job_id)


_WATCHES: dict[str, JobWatch] = {}
_WATCHES_LOCK = threading.Lock()


def watch_for(host: str) -> JobWatch:
    """The one JobWatch of a host in this process (every session of the host shares it)."""
    with _WATCHES_LOCK:
        return _WATCHES.setdefault(host, JobWatch())


class SlurmLauncher(Launcher):
    """Submits, follows and cancels one Slurm job per launch."""

    def __init__(
        self,
        transport: Transport,
        config: HostConfig,
        watch: JobWatch,
        ports: list[int],
        exports: Callable[[], str] = lambda: "",
    ):
        super().__init__(transport)
        self._exports = exports
        """The host's environment as `export` lines: Slurm's commands see it (SLURM_CONF, PATH) as launches do."""
        if config.slurm is None:
            raise LaunchError(f"host {config.name!r} has transport slurm but no slurm: section")
        self.config = config
        self.slurm = config.slurm
        self.watch = watch
        self.ports = ports

    def prepare(self, spec: LaunchSpec) -> None:
        """Write `cmd.sh`, `env.masked` and the batch script `job.sh` into the run directory."""
        super().prepare(spec)
        self.transport.write_file(self._path(spec, "job.sh"), render_job_sh(spec, self.ports), mode=0o755)

    def start(self, spec: LaunchSpec, secrets: Mapping[str, str]) -> Launch:
        """Submit the run's job; LaunchError with Slurm's message when sbatch refuses it."""
        if self.watch.aborting:
            raise Abandoned()
        if self.transport.file_size(self._path(spec, "job_id")) is not None:
            raise LaunchError(f"run {spec.run_id} was already submitted (its run directory holds a job_id)")
        self.prepare(spec)
        submission = Submission(
            script=self._path(spec, "job.sh"),
            run_dir=spec.run_dir,
            log_path=spec.log_path,
            name=job_name(spec.run_id),
            gpus=spec.gpu_count,
            partition=self.slurm.partition,
            account=self.slurm.account,
            qos=self.slurm.qos,
            time=self.slurm.time,
            extra=self.slurm.sbatch_args,
        )
        result = self._slurm(submission.command(), SBATCH_TIMEOUT_S, secrets_stdin(secrets), idempotent=False)
        job_id = parse_sbatch(result)
        self.watch.track(job_id)
        self.transport.write_file(self._path(spec, "job_id"), job_id + "\n")
        return Launch(
            spec, 0, job_id=job_id, api_key=api_key_of(spec, secrets), secret_values=tuple(secrets.values())
        )

    def recover(self, spec: LaunchSpec, secrets: Mapping[str, str] | None = None) -> Launch | None:
        """The run's job, found by its name in the queue, else by its `job_id` file; None if never submitted."""
        queued = parse_squeue(self._slurm(squeue_command(name=job_name(spec.run_id))))
        recorded = self.transport.read_range(self._path(spec, "job_id"), 0).decode(errors="replace").strip()
        ids = sorted(queued, key=lambda j: (j != recorded, j))
        job_id = ids[0] if ids else recorded
        if not job_id:
            return None
        for extra in ids[1:]:  # never expected (start refuses a second submit); never left running either
            self._slurm(scancel_command([extra]))
        self.watch.track(job_id)
        known = secrets or {}
        launch = Launch(
            spec, 0, job_id=job_id, api_key=api_key_of(spec, known), secret_values=tuple(known.values())
        )
        placed = self._read_placement(launch)
        return placed or launch

    def alive(self, launch: Launch) -> bool:
        """Whether the job is queued or running."""
        info = self.watch.get(self._slurm, self._id(launch))
        return info is not None and info.active

    def placed(self, launch: Launch, on_wait: Callable[[str], None] | None = None) -> Launch:
        """Wait for the job to run and write its placement; the launch with its node, port and GPUs."""
        job_id = self._id(launch)
        said = ""
        running_since: float | None = None
        while True:
            info = self.watch.get(self._slurm, job_id)
            placed = self._read_placement(launch) if info is None or info.state == "RUNNING" else None
            if placed is not None:
                ran_at = running_since or time.monotonic()
                return dataclasses.replace(
                    placed, started_at=ran_at, pending_s=round(max(0.0, ran_at - launch.started_at), 3)
                )
            if info is None or not info.active:
                final = self._final(job_id)
                state = "unknown to Slurm" if final is None else f"JobState={final.state}, Reason={final.reason}"
                raise LaunchError(
                    f"Slurm job {job_id} ended before its server started ({state}); see {launch.spec.log_path}"
                )
            if info.state == "RUNNING":
                running_since = running_since or time.monotonic()
                if time.monotonic() - running_since > PLACEMENT_WAIT_S:
                    raise LaunchError(f"Slurm job {job_id} runs on {info.node} but its job script never started")
            elif on_wait is not None and info.state + str(info.reason) != said:
                said = info.state + str(info.reason)
                on_wait(f"{info.state.lower()} ({info.reason})" if info.reason else info.state.lower())
            time.sleep(POLL_S)

    def exit_code(self, launch: Launch) -> int | None:
        """The server's exit status when the job ended by itself (COMPLETED/FAILED), else None."""
        if self.alive(launch):
            return None
        final = self._final(self._id(launch))
        return final.exit_code if final is not None and final.state in ("COMPLETED", "FAILED") else None

    def killed_by_scheduler(self, launch: Launch) -> SchedulerEnd | None:
        """Slurm's end state when Slurm (time limit, preemption, node failure) or an outside scancel ended it."""
        job_id = self._id(launch)
        if job_id in self.watch.cancelled_by_us or self.alive(launch):
            return None
        final = self._final(job_id)
        if final is None or final.state not in KILLED_STATES:
            return None
        return SchedulerEnd(final.state, killed_reason(final))

    def ends_after_fatal(self, launch: Launch) -> bool:
        """Within SCHEDULER_END_WAIT_S: the last line may be slurmstepd's (`*** JOB 1 ON node CANCELLED AT ...`), and
        an end Slurm caused is named as Slurm's (killed_by_scheduler), not the cell's, once the job left the queue."""
        deadline = time.monotonic() + SCHEDULER_END_WAIT_S
        while self.alive(launch):
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        return True

    def stop(self, launch: Launch, grace_s: float, then: str | None = None) -> Stopped:
        """scancel the job and wait until it left the queue (TransportError if it never does); `then` is not run:
        the node's GPUs are Slurm's to free, not ours to look at."""
        job_id = self._id(launch)
        if not self.alive(launch):
            self.watch.forget(job_id)
            return Stopped(False)
        self.watch.cancelled_by_us.add(job_id)
        self._slurm(scancel_command([job_id]))
        deadline = time.monotonic() + grace_s + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            info = self.watch.get(self._slurm, job_id, fresh=True)
            if info is None or (not info.active and info.state != "COMPLETING"):
                self.watch.forget(job_id)
                return Stopped(False)
            time.sleep(POLL_S)
        raise TransportError(f"Slurm job {job_id} still in the queue {grace_s + CANCEL_WAIT_S:.0f}s after scancel")

    def cancel_leftovers(self, job_ids: list[str], grace_s: float) -> list[str]:
        """scancel the jobs among `job_ids` still in the queue (one squeue for all) and wait until they left it."""
        if not job_ids:
            return []
        left = sorted(j.job_id for j in parse_squeue(self._slurm(squeue_command(job_ids))).values() if j.active)
        self._cancel_and_wait(left, grace_s + CANCEL_WAIT_S)
        return left

    def abandon(self) -> None:
        """Cancel every job this process submitted and has not seen end; the attempts still watching stop."""
        self.watch.aborting = True
        self._cancel_and_wait(sorted(self.watch.submitted), CANCEL_WAIT_S)

    def _cancel_and_wait(self, ids: list[str], wait_s: float) -> None:
        if not ids:
            return
        self.watch.cancelled_by_us.update(ids)
        self._slurm(scancel_command(ids))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            left = parse_squeue(self._slurm(squeue_command(ids)))
            if not any(j.active or j.state == "COMPLETING" for j in left.values()):
                return
            time.sleep(POLL_S)
        raise TransportError(f"Slurm jobs {', '.join(ids)} still in the queue {wait_s:.0f}s after scancel")

    def _final(self, job_id: str) -> JobInfo | None:
        """The job's state from scontrol, waiting out COMPLETING (the end state is known once it is over)."""
        deadline = time.monotonic() + CANCEL_WAIT_S
        while True:
            info = parse_scontrol(job_id, self._slurm(scontrol_command(job_id)))
            if info is None or info.state != "COMPLETING" or time.monotonic() > deadline:
                return info
            time.sleep(POLL_S)

    def _read_placement(self, launch: Launch) -> Launch | None:
        raw = self.transport.read_range(self._path(launch.spec, "placement"), 0, 4096)
        placed = parse_placement(raw.decode(errors="replace"))
        if placed is None:
            return None
        host, port, gpus = placed
        info = self.watch.get(self._slurm, self._id(launch))
        node = info.node if info is not None and info.node else host
        spec = dataclasses.replace(launch.spec, port=port, gpus=gpus)
        return dataclasses.replace(launch, spec=spec, node=node)

    def _slurm(
        self, command: str, timeout: float = 60.0, stdin: bytes | None = None, *, idempotent: bool = True
    ) -> CommandResult:
        return self.transport.run(self._exports() + command, timeout=timeout, stdin=stdin, idempotent=idempotent)

    @staticmethod
    def _id(launch: Launch) -> str:
        if not launch.job_id:
            raise LaunchError(f"run {launch.spec.run_id} has no Slurm job id")
        return launch.job_id

    @staticmethod
    def _path(spec: LaunchSpec, name: str) -> str:
        return posixpath.join(spec.run_dir, name)

