"""One launch on a host: its run directory, its exact `cmd.sh`, its process group, its stop.

The remote run directory is the truth about a launch (`<workdir>/runs/<run_id>/`): `cmd.sh`,
`env.masked`, `pid`, `server.log` and, once the server exits by itself, `exit_code`. The store
records the run before the launch, so after an orchestrator crash `--resume` finds the pid
here and re-attaches or reaps instead of launching twice.
"""

from __future__ import annotations

import itertools
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrator.errors import LaunchError
from orchestrator.secret import SecretRef
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.shell import quote

API_KEY_FLAGS = ("--api-key",)
"""SGLang's flag whose value its HTTP API then demands as `Authorization: Bearer <key>` (all but /health*)."""
MAX_ARG_BYTES = 131071
"""Linux's MAX_ARG_STRLEN (32 pages) less the NUL: exec refuses a longer argument or NAME=value with E2BIG."""


@dataclass(frozen=True)
class Stopped:
    """A launch once stopped."""

    sigkilled: bool
    """It survived SIGTERM for the whole grace (ranks hung in shutdown)."""
    after: CommandResult | None = None
    """The answer of the command asked to run once it was gone; None when none ran (none asked, or a batch
    scheduler's stop, which runs nothing on the node)."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one server, secrets excepted (they are read at launch time)."""

    run_id: str
    argv: tuple[str | SecretRef, ...]
    """Launcher words plus SGLang flags in the host's spelling, `--host`/`--port` included; a secret
    flag value is a SecretRef, which the script expands from the environment (see `secret_names`)."""
    env: dict[str, str]
    """Plain (non-secret) environment; CUDA_VISIBLE_DEVICES included."""
    secret_names: tuple[str, ...]
    gpus: tuple[int, ...]
    port: int
    run_dir: str
    install: str | None = None
    gpu_count: int = 0
    """GPUs to ask a batch scheduler for, which then picks them (`gpus` is known only once the job runs)."""

    @property
    def log_path(self) -> str:
        """The server's combined stdout and stderr."""
        return posixpath.join(self.run_dir, "server.log")

    @property
    def pid_path(self) -> str:
        """Where the launch wrapper writes its pid (== its process group id)."""
        return posixpath.join(self.run_dir, "pid")

    @property
    def exit_code_path(self) -> str:
        """Written only when the server exits by itself."""
        return posixpath.join(self.run_dir, "exit_code")

    @property
    def command_line(self) -> str:
        """The launch command as a human would type it (every value quoted, secrets as `"${VAR}"`)."""
        return " ".join(a.shell_ref() if isinstance(a, SecretRef) else quote(a) for a in self.argv)

    @property
    def secret_flags(self) -> tuple[SecretRef, ...]:
        """The secrets on the command line (their variables are among `secret_names`)."""
        return tuple(a for a in self.argv if isinstance(a, SecretRef))

    def api_key_ref(self) -> SecretRef | None:
        """The secret the server's API demands, when the launch passes `--api-key`."""
        pairs = itertools.pairwise(self.argv)
        return next((w for prev, w in pairs if prev in API_KEY_FLAGS and isinstance(w, SecretRef)), None)


def render_cmd_sh(spec: LaunchSpec) -> str:
    """A standalone script that launches exactly this server; secrets are named, never written."""
    lines = [
        "#!/usr/bin/env bash",
        f"# orchestrator run {spec.run_id}: launches the server exactly as the sweep did.",
        "# Secrets are not stored here: export them in your environment before running this script.",
        "set -u",
    ]
    for name in spec.secret_names:
        lines.append(f': "${{{name}:?{name} must be set in the environment (a secret, never written to disk)}}"')
        lines.append(f"export {name}")
    for name, value in sorted(spec.env.items()):
        lines.append(f"export {name}={quote(value)}")
    lines.append(f"cd {quote(spec.run_dir)} 2>/dev/null || true")
    lines.append("exec " + spec.command_line)
    return "\n".join(lines) + "\n"


def render_env_masked(spec: LaunchSpec) -> str:
    """The launch environment with every secret masked, one `NAME=value` a line."""
    rows = [f"{k}={v}" for k, v in sorted(spec.env.items())]
    rows += [f"{name}=***" for name in spec.secret_names]
    return "\n".join(sorted(rows)) + "\n"


@dataclass
class Launch:
    """A started server: its spec and process group, and when it started."""

    spec: LaunchSpec
    pgid: int
    """0 for a batch job (its processes are the scheduler's to end)."""
    started_at: float = field(default_factory=time.monotonic)
    api_key: str | None = field(default=None, repr=False)
    """The key the server's API demands (its `--api-key` secret), for the probes."""
    secret_values: tuple[str, ...] = field(default=(), repr=False)
    """Every secret the launch was given: masked wherever its log repeats one."""
    job_id: str | None = None
    """The batch scheduler's job id (Slurm), None for a process group started by us."""
    node: str | None = None
    """The node a batch job runs on, once it runs."""
    pending_s: float | None = None
    """Seconds the job waited in the scheduler's queue before it ran (not launch time)."""
    prepare_s: float | None = None
    """Seconds spent writing the run directory's `cmd.sh` and `env.masked` (None: not measured, re-attached)."""
    spawn_s: float | None = None
    """Seconds the detached start took, from sending it to the host's reply with the pid."""


class Launcher:
    """Starts, watches and stops launches on one host through its transport."""

    def __init__(self, transport: Transport):
        self.transport = transport

    def prepare(self, spec: LaunchSpec) -> None:
        """Create the run directory with `cmd.sh` and `env.masked` (raises if it cannot be written)."""
        # 0700: the script names its secrets only, but a run directory is nobody else's business.
        self.transport.write_file(posixpath.join(spec.run_dir, "cmd.sh"), render_cmd_sh(spec), mode=0o700)
        self.transport.write_file(posixpath.join(spec.run_dir, "env.masked"), render_env_masked(spec), mode=0o600)

    def start(self, spec: LaunchSpec, secrets: Mapping[str, str]) -> Launch:
        """Launch `cmd.sh` detached in its own session; the exit status lands in `exit_code`."""
        began = time.monotonic()
        too_long = oversized_words(spec, secrets)
        if too_long:
            # The exec in cmd.sh would fail with E2BIG, leaving only bash's one line in the log (exit 126).
            raise LaunchError(
                f"Argument list too long (E2BIG): {'; '.join(too_long)}; Linux refuses any single argument or "
                f"environment entry over {MAX_ARG_BYTES + 1} bytes (128 KiB), so the server cannot be started "
                "with it (fix: give the flag a shorter value, e.g. a file path if it accepts one)"
            )
        self.prepare(spec)
        prepared = time.monotonic()
        cmd_sh = posixpath.join(spec.run_dir, "cmd.sh")
        # The wrapper shell leads the process group and outlives the server only to record how it
        # ended; a server stopped by us takes the wrapper with it, so `exit_code` means "died by itself".
        command = f"bash {quote(cmd_sh)}; code=$?; umask 077; echo $code > {quote(spec.exit_code_path)}"
        pgid = self.transport.start_detached(
            command, spec.log_path, spec.pid_path, cwd=spec.run_dir, secrets=dict(secrets)
        )
        spawned = time.monotonic()
        return Launch(
            spec, pgid, started_at=spawned, api_key=api_key_of(spec, secrets), secret_values=tuple(secrets.values()),
            prepare_s=round(prepared - began, 4), spawn_s=round(spawned - prepared, 4),
        )  # fmt: skip

    def recover(self, spec: LaunchSpec, secrets: Mapping[str, str] | None = None) -> Launch | None:
        """Re-attach to a launch whose run directory exists (after an orchestrator crash)."""
        raw = self.transport.read_range(spec.pid_path, 0).decode(errors="replace").strip()
        if not raw.isdigit():
            return None
        known = secrets or {}
        return Launch(spec, int(raw), api_key=api_key_of(spec, known), secret_values=tuple(known.values()))

    def alive(self, launch: Launch) -> bool:
        """Whether any non-zombie process of the launch is left."""
        # The group's leader (the wrapper shell) lives as long as the server: one small read of its
        # /proc entry answers the common case, where listing the process table costs a command.
        stat = self.transport.read_range(f"/proc/{launch.pgid}/stat", 0, 4096)
        return leads_group(stat, launch.pgid) or self.transport.group_alive(launch.pgid)

    def exit_code(self, launch: Launch) -> int | None:
        """The server's exit status if it exited by itself, else None."""
        raw = self.transport.read_range(launch.spec.exit_code_path, 0).decode(errors="replace").strip()
        return int(raw) if raw.lstrip("-").isdigit() else None

    def stop(self, launch: Launch, grace_s: float, then: str | None = None) -> Stopped:
        """SIGTERM the whole process group, SIGKILL after `grace_s`; `then`: a shell command run on the host once
        the group is gone, in the same round trip (what the host looks like after the launch, e.g. its GPUs)."""
        if then is None:
            return Stopped(self.transport.kill_group(launch.pgid, grace_s))
        sigkilled, after = self.transport.kill_group_then(launch.pgid, grace_s, then)
        return Stopped(sigkilled, after)


def oversized_words(spec: LaunchSpec, secrets: Mapping[str, str]) -> list[str]:
    """What exec would refuse in the launch: `--flag: value of N bytes` for each word or env entry over the limit."""
    found = []
    previous = ""
    for word in spec.argv:
        text = secrets.get(word.name, "") if isinstance(word, SecretRef) else word
        size = len(text.encode("utf-8", "surrogateescape"))
        if size > MAX_ARG_BYTES:
            # A secret is named by its variable, never shown.
            shown = word.shell_ref() if isinstance(word, SecretRef) else f"{text[:40]!r}..."
            what = f"the value of {previous}" if previous.startswith("-") else f"argument {shown}"
            found.append(f"{what} is {size} bytes")
        previous = "" if isinstance(word, SecretRef) else text
    env = {**spec.env, **{n: secrets.get(n, "") for n in spec.secret_names}}
    found += [f"environment variable {name} is {len(f'{name}={value}'.encode())} bytes" for name, value in
              env.items() if len(f"{name}={value}".encode("utf-8", "surrogateescape")) > MAX_ARG_BYTES]  # fmt: skip
    return found


def api_key_of(spec: LaunchSpec, secrets: Mapping[str, str]) -> str | None:
    """The value of the launch's `--api-key` secret among the secrets it was started with."""
    ref = spec.api_key_ref()
    return secrets.get(ref.name) if ref is not None else None


def leads_group(stat: bytes, pgid: int) -> bool:
    """Whether a `/proc/<pid>/stat` line is a live (not zombie) process leading process group `pgid`."""
    # The command name may hold spaces and parentheses; the fields after the last ')' do not.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return len(fields) > 2 and fields[0] not in (b"Z", b"X") and fields[2] == str(pgid).encode()

