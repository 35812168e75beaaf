"""Slurm's client commands as the orchestrator uses them: building sbatch/squeue/scontrol/scancel lines, reading
their output. Pure: nothing here runs a command (slurm/jobs.py does, through a Transport).

Job state comes from `squeue` while a job is queued or running, then from `scontrol show job` (which keeps
it for MinJobAge after the end); never from `sacct`, which needs slurmdbd (many clusters, and tests, lack it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.errors import LaunchError
from orchestrator.transport.base import CommandResult
from orchestrator.transport.launch import encode_secrets
from orchestrator.transport.shell import Raw, ShellCommand

JOB_PREFIX = "orch-"
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
     "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "STOPPED"}
)  # fmt: skip
"""States of a job that is not over (COMPLETING is over for us: its processes are being killed)."""
WAITING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
KILLED_STATES = frozenset(
    {"CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED"}
)
"""End states Slurm (or someone with scancel) imposed on the job, as opposed to its program ending by itself."""

_SQUEUE_FORMAT = "%i|%T|%N|%r|%j"
# Reads `NAME=base64` secret lines from stdin up to a blank line, exports them, then runs "$@" (sbatch, which
# hands its whole environment to the job): no secret is ever on a command line or in a file of ours.
_WITH_SECRETS = r"""while IFS= read -r line; do
  [ -z "$line" ] && break
  value=$(printf %s "${line#*=}" | base64 -d && echo x) || exit 97
  export "${line%%=*}=${value%x}" || exit 97
done
exec "$@" """


@dataclass(frozen=True)
class JobInfo:
    """One job as squeue or scontrol shows it."""

    job_id: str
    state: str
    node: str | None = None
    reason: str | None = None
    name: str | None = None
    exit_code: int | None = None
    """The program's exit status (ExitCode=X:0), 128+signal when a signal ended it (ExitCode=0:S); scontrol only."""

    @property
    def active(self) -> bool:
        """Queued or running: not over."""
        return self.state in ACTIVE_STATES

    @property
    def waiting(self) -> bool:
        """Queued, not yet running."""
        return self.state in WAITING_STATES


def job_name(run_id: str) -> str:
    """The name every job of a run carries, so a job submitted just before a crash is found again by name."""
    return JOB_PREFIX + run_id


@dataclass(frozen=True)
class Submission:
    """What `sbatch` is given for one run (everything but the environment, which travels as the job's)."""

    script: str
    run_dir: str
    log_path: str
    name: str
    gpus: int
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    extra: tuple[str, ...] = ()

    def command(self) -> str:
        """The sbatch line; --parsable so the reply is the job id alone."""
        words: list[str | int] = ["sbatch", "--parsable", "--job-name", self.name, "--output", self.log_path]
        words += ["--chdir", self.run_dir, "--export", "ALL"]
        if self.gpus > 0:
            words.append(f"--gres=gpu:{self.gpus}")
        for flag, value in (("--partition", self.partition), ("--account", self.account), ("--qos", self.qos),
                            ("--time", self.time)):  # fmt: skip
            if value:
                words += [flag, value]
        words += [*self.extra, self.script]
        return ShellCommand("sh", "-c", _WITH_SECRETS, "orchestrator-sbatch", *words).raw()


def secrets_stdin(secrets: Mapping[str, str]) -> bytes:
    """The stdin of `Submission.command()`: the secrets it exports into sbatch's (and so the job's) environment."""
    return encode_secrets(secrets)


def parse_sbatch(result: CommandResult) -> str:
    """The job id `sbatch --parsable` printed (`ID` or `ID;cluster`), or LaunchError with Slurm's own message."""
    text = result.text.strip().splitlines()
    first = text[-1].split(";")[0].strip() if text else ""
    if result.ok and re.fullmatch(r"\d+(_\d+)?", first):
        return first
    detail = " ".join(line.removeprefix("sbatch: ").strip() for line in result.stderr_text.splitlines() if line.strip())
    raise LaunchError(f"Slurm refused the job (sbatch exit {result.exit_code}): {detail or result.text.strip()}")


def squeue_command(job_ids: Iterable[str] = (), name: str | None = None) -> str:
    """`squeue` for some jobs (by id or by name), one `ID|STATE|NODES|REASON|NAME` line each."""
    words: list[str | Raw] = ["squeue", "-h", "-o", _SQUEUE_FORMAT]
    ids = sorted(set(job_ids))
    if ids:
        words += ["-j", ",".join(ids)]
    if name:
        words += ["-n", name]
    return ShellCommand(*words).raw()


def parse_squeue(result: CommandResult) -> dict[str, JobInfo]:
    """Job id -> what squeue said; squeue's "Invalid job id" (none of the ids is known any more) is no job."""
    if not result.ok:
        if "Invalid job id" in result.stderr_text:
            return {}
        raise LaunchError(f"squeue failed (exit {result.exit_code}): {result.stderr_text.strip()}")
    jobs: dict[str, JobInfo] = {}
    for line in result.text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or not parts[0]:
            continue
        job_id, state, node, reason, name = parts
        jobs[job_id] = JobInfo(job_id, state.split()[0], node or None, _none(reason), name)
    return jobs


def scontrol_command(job_id: str) -> str:
    """`scontrol show job -o ID`: one line of Key=Value pairs, kept for MinJobAge after the job ended."""
    return ShellCommand("scontrol", "show", "job", "-o", job_id).raw()


def parse_scontrol(job_id: str, result: CommandResult) -> JobInfo | None:
    """The job's final (or current) state from `scontrol show job -o`; None when Slurm no longer knows it."""
    if not result.ok:
        return None
    fields = dict(re.findall(r"(\w+)=(\S*)", result.text))
    state = fields.get("JobState")
    if not state:
        return None
    return JobInfo(
        job_id,
        state,
        _none(fields.get("NodeList")),
        _none(fields.get("Reason")),
        fields.get("JobName"),
        _exit_status(fields.get("ExitCode", "")),
    )


def scancel_command(job_ids: Sequence[str]) -> str:
    """`scancel` for these jobs; scancel of a job already gone only prints a message."""
    return ShellCommand("scancel", *job_ids, Raw("2>&1; exit 0")).raw()


def killed_reason(job: JobInfo) -> str:
    """Why Slurm ended a job, in words, with Slurm's state and reason."""
    words = {
        "CANCELLED": "was cancelled outside the orchestrator (scancel)",
        "TIMEOUT": "reached its time limit",
        "PREEMPTED": "was preempted",
        "NODE_FAIL": "lost its node (node failure)",
        "BOOT_FAIL": "could not boot its node",
        "DEADLINE": "reached its deadline",
        "OUT_OF_MEMORY": "ran out of the memory Slurm allows it",
        "REVOKED": "was revoked",
    }.get(job.state, f"ended as {job.state}")
    reason = f", Reason={job.reason}" if job.reason else ""
    node = f" on {job.node}" if job.node else ""
    return f"Slurm job {job.job_id}{node} {words} (JobState={job.state}{reason})"


def _none(value: str | None) -> str | None:
    return None if value in (None, "", "(null)", "None") else value


def _exit_status(text: str) -> int | None:
    match = re.fullmatch(r"(\d+):(\d+)", text)
    if not match:
        return None
    code, sig = int(match[1]), int(match[2])
    return 128 + sig if sig else code
