"""The detached-launch wrapper shared by every transport.

One short `sh` script, sent as the launch channel's command, does the whole launch in one round
trip: it reads `NAME=base64` secret lines from its stdin up to a blank line and exports them
(so no secret is ever in a file or on a command line), claims the pid file (noclobber, so a run
is never launched twice), then starts the job with `setsid nohup` in a new session whose pid is
its process group id. The job writes its pid to the pid file and then to the launcher through a
pipe, before it execs the command: when the launcher answers, the job has its own session and
process group and the pid file is in place.
"""

from __future__ import annotations

import base64
import logging
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from orchestrator.errors import LaunchError
from orchestrator.transport.base import CommandResult
from orchestrator.transport.shell import ShellCommand, check_env_name

LAUNCH_TIMEOUT_S = 30.0
PID_WAIT_S = 5.0
"""How long a recovered launch may take to write its pid into the pid file it has claimed."""
PID_POLL_S = 0.01

log = logging.getLogger(__name__)

# $1 cwd, $2 log dir, $3 log, $4 pid dir, $5 pid file, $6 command.
# A secret stream cut short (no blank line) aborts: launching without the secrets would fail later
# in a confusing way. `printf` is a builtin, so encoded secrets never reach an argv either.
# The directories, the log and the pid file are made private (umask 077): a server's log may echo its API key.
# The job itself runs with the login's own umask, so the caches it shares with other jobs stay as they were.
_SCRIPT = r"""ok=
while IFS= read -r line; do
  [ -z "$line" ] && { ok=1; break; }
  value=$(printf %s "${line#*=}" | base64 -d && echo x) || exit 97
  export "${line%%=*}=${value%x}" || exit 97
done
[ -n "$ok" ] || exit 98
cd -- "$1" || exit 96
mask=$(umask); umask 077
{ [ -d "$2" ] && [ -d "$4" ]; } || mkdir -p -- "$2" "$4" || exit 94
(set -C; : > "$5") 2>/dev/null || { [ -e "$5" ] && exit 95; exit 94; }
: >> "$3" || exit 94
umask "$mask"
pid=$(setsid nohup sh -c 'echo $$ > "$1" && echo $$ && exec sh -c "$2" >> "$3" 2>&1' orchestrator-job \
  "$5" "$6" "$3" < /dev/null 2>> "$3" &)
[ -n "$pid" ] || exit 94
echo $pid"""

EXIT_PID_FILE_EXISTS = 95
_REASONS = {
    94: "cannot create the log file, the pid file or their directories",
    EXIT_PID_FILE_EXISTS: "the pid file already exists: this run was already launched (use a fresh run directory)",
    96: "cannot change to the working directory",
    97: "a secret could not be decoded or exported",
    98: "the secrets did not arrive in full (connection dropped during the launch?)",
}


@dataclass(frozen=True)
class LaunchRequest:
    """One launch: the command to send, the stdin that carries its secrets, how to read the reply."""

    command: str
    stdin: bytes = field(repr=False)
    log_path: str
    pid_path: str

    @classmethod
    def build(
        cls,
        command: str,
        log_path: str,
        pid_path: str,
        cwd: str | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> LaunchRequest:
        """Prepare the launch of `command` (a shell string) with `secrets` exported into its environment."""
        wrapper = ShellCommand(
            "sh", "-c", _SCRIPT, "orchestrator-launch", cwd or ".",
            posixpath.dirname(log_path) or ".", log_path, posixpath.dirname(pid_path) or ".", pid_path, command,
        )  # fmt: skip
        return cls(wrapper.raw(), encode_secrets(secrets or {}), log_path, pid_path)

    def parse(self, result: CommandResult) -> int:
        """The pid the launch reported, or LaunchError saying why it did not start."""
        if result.exit_code == 0:
            text = result.stdout.decode("ascii", "replace").strip()
            if text.isdigit():
                return int(text)
        reason = _REASONS.get(result.exit_code, f"the launch wrapper exited {result.exit_code}")
        detail = result.stderr.decode("utf-8", "replace").strip()
        raise LaunchError(
            f"launch with log {self.log_path} and pid file {self.pid_path}: {reason}"
            + (f" ({detail})" if detail else "")
        )


def encode_secrets(secrets: Mapping[str, str]) -> bytes:
    """`NAME=base64(value)` lines and a blank line, as the launch wrapper reads them from stdin."""
    lines = []
    for name, value in secrets.items():
        if "\0" in value:
            raise ValueError(f"secret {name} contains a NUL byte, which an environment cannot hold")
        lines.append(f"{check_env_name(name)}={base64.b64encode(value.encode()).decode()}\n")
    return ("".join(lines) + "\n").encode()


def recover_pid(
    read: Callable[[], bytes | None], pid_path: str, where: str, sleep: Callable[[float], None]
) -> int | None:
    """The pid of a launch whose reply was lost (`read` reads its pid file), or None if it never claimed the file."""
    first = read()
    if first is None:
        return None
    # Here, not at the top: tenacity costs 45 ms to import, and the local transport never recovers a launch.
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    # Claimed but empty: the launcher is between claiming the file and writing the pid.
    waiting = Retrying(
        stop=stop_after_delay(PID_WAIT_S), wait=wait_fixed(PID_POLL_S), sleep=sleep,
        retry=retry_if_result(lambda data: not data), retry_error_callback=lambda state: b"",
    )  # fmt: skip
    data = first or waiting(read) or b""
    text = data.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise LaunchError(f"{where}: launch lost its reply and {pid_path} holds no pid ({text!r})")
    log.warning("%s: launch reply lost; recovered pid %s from %s", where, text, pid_path)
    return int(text)
