"""The transport seam: one contract for driving a host, whether over SSH or on this machine.

Everything above `transport/` talks to a host only through `Transport` and sees only the
`TransportError` tree from `orchestrator.errors`; foreign exceptions are translated here by
`map_transport_errors()` and nowhere else (httpx's `map_httpcore_exceptions` does the same).
"""

from __future__ import annotations

import abc
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from orchestrator.errors import CommandTimeout, ConnectFailed, ConnectionLost, HostKeyRejected, TransportError
from orchestrator.transport.shell import Raw, ShellCommand

KILL_POLL_S = 0.005
KILL_AFTER_SIGKILL_S = 5.0

# `ps` lists zombies, and `kill -0` reports them alive; a group whose members are all zombies is dead.
_ALIVE = "ps -eo pgid=,stat= | awk -v g=\"$PG\" '$1 == g && $2 !~ /^Z/ {f = 1} END {exit !f}'"
_GROUP_ALIVE = f"PG=$1; {_ALIVE}"
# While the group's leader (the launch wrapper, which outlives the server) is running, a round is the shell's
# own `read` of its /proc entry and a `sleep`, so a stopped group is seen gone within ~5 ms. Once the leader
# is a zombie or gone, `ps` says whether any member but zombies is left (`kill -0` counts zombies).
_UNTIL_GONE = f"""PG=$1
while kill -s 0 -- "-$PG" 2>/dev/null; do
  stat=; {{ read -r stat < "/proc/$PG/stat"; }} 2>/dev/null
  case "${{stat##*) }}" in Z*|X*|"") {_ALIVE} || exit 0 ;; esac
  sleep {KILL_POLL_S}
done"""
# $1 pgid, $2 grace (s), $3 wait after SIGKILL (s), $4 _UNTIL_GONE; `timeout` bounds each wait by the clock.
_KILL_GROUP = """PG=$1
kill -s 0 -- "-$PG" 2>/dev/null || exit 0
kill -s TERM -- "-$PG" 2>/dev/null
timeout "$2" sh -c "$4" until-gone "$PG" && exit 0
kill -s KILL -- "-$PG" 2>/dev/null
timeout "$3" sh -c "$4" until-gone "$PG" && exit 3
exit 4"""
# $1 _KILL_GROUP, $2-$5 its arguments, $6 the command to run once the group is gone.
_KILL_THEN = """sh -c "$1" kill-group "$2" "$3" "$4" "$5"; k=$?
printf 'kill-group:%s\\n' "$k"
eval "$6"
"""


@dataclass(frozen=True)
class CommandResult:
    """What a command left behind: its exit code (negative: killed by a signal) and raw output."""

    exit_code: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")


class Transport(abc.ABC):
    """Run commands, start detached process groups, and read or write files on one host.

    Commands are shell strings run with `sh -c` semantics, never with a pty. Paths should be
    absolute (a relative one resolves against the login directory over SSH, the cwd locally).
    """

    @abc.abstractmethod
    def run(
        self, command: str, timeout: float = 30.0, stdin: bytes | None = None, *, idempotent: bool = True
    ) -> CommandResult:
        """Run `command` to completion; CommandTimeout past `timeout`, and then the command is killed.

        Whatever it left running in the background is killed with it at a timeout (use
        `start_detached` for what must outlive it). `idempotent=False` forbids sending the
        command again after a dropped connection (ConnectionLost instead).
        """

    @abc.abstractmethod
    def read_range(self, path: str, offset: int, length: int | None = None) -> bytes:
        """Raw bytes of `path` from 0-based `offset` (to the end when `length` is None); b"" if missing."""

    @abc.abstractmethod
    def file_size(self, path: str) -> int | None:
        """Size of `path` in bytes, or None if it does not exist."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write `path` atomically (temp file + rename), creating its parent directories."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection, if any; the transport may be used again afterwards."""

    @abc.abstractmethod
    def describe(self) -> str:
        """A short human name for the host, e.g. `ssh orchtest@127.0.0.1:2222` or `local`."""

    @abc.abstractmethod
    def start_detached(
        self,
        command: str,
        log_path: str,
        pid_path: str,
        cwd: str | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> int:
        """Start `command` in a new session and process group; return its pid (== its pgid).

        stdout and stderr are appended to `log_path`, stdin is /dev/null, and the pid is written
        to `pid_path`, which must not exist yet (an existing one means "already launched": a run
        is never started twice; LaunchError). `secrets` reach the process environment through the
        launch channel's stdin, never through a file or a command line. The job survives `close()`.
        """

    @property
    def connection_epoch(self) -> int:
        """How many connections to the host were opened so far: a change means one dropped in between."""
        return 0

    def signal_group(self, pgid: int, sig: int) -> None:
        """Send `sig` to every process of group `pgid`; a group that is gone is not an error."""
        name = signal.Signals(sig).name.removeprefix("SIG")
        cmd = ShellCommand("kill", "-s", name, "--", f"-{_check_pgid(pgid)}", Raw("2>/dev/null; exit 0"))
        self.run(cmd.raw())

    def group_alive(self, pgid: int) -> bool:
        """Whether group `pgid` has a member that is not a zombie."""
        result = self.run(ShellCommand("sh", "-c", _GROUP_ALIVE, "group-alive", _check_pgid(pgid)).raw())
        if result.exit_code not in (0, 1):
            raise TransportError(f"{self.describe()}: cannot list processes: {result.stderr_text.strip()}")
        return result.ok

    def kill_group(self, pgid: int, grace_s: float = 10.0) -> bool:
        """SIGTERM group `pgid`, wait up to `grace_s` for it to go, then SIGKILL; True if KILL was needed."""
        cmd = ShellCommand(
            "sh", "-c", _KILL_GROUP, "kill-group", _check_pgid(pgid),
            f"{grace_s:.3f}", f"{KILL_AFTER_SIGKILL_S:.3f}", _UNTIL_GONE,
        )  # fmt: skip
        result = self.run(cmd.raw(), timeout=grace_s + KILL_AFTER_SIGKILL_S + 10)
        return self._killed(pgid, result.exit_code, result.stderr_text)

    def kill_group_then(self, pgid: int, grace_s: float, then: str) -> tuple[bool, CommandResult]:
        """`kill_group`, then the shell command `then` in the same round trip (what the host looks like once the
        group is gone, e.g. its GPUs); `then`'s output and exit code come back as its CommandResult."""
        cmd = ShellCommand(
            "sh", "-c", _KILL_THEN, "kill-then", _KILL_GROUP, _check_pgid(pgid),
            f"{grace_s:.3f}", f"{KILL_AFTER_SIGKILL_S:.3f}", _UNTIL_GONE, then,
        )  # fmt: skip
        result = self.run(cmd.raw(), timeout=grace_s + KILL_AFTER_SIGKILL_S + 40)
        head, _, rest = result.stdout.partition(b"\n")
        code = head.decode(errors="replace").removeprefix("kill-group:")
        if not code.isdigit():
            raise TransportError(f"{self.describe()}: kill_group {pgid} failed: {result.stderr_text.strip()}")
        sigkilled = self._killed(pgid, int(code), result.stderr_text)
        return sigkilled, CommandResult(result.exit_code, rest, result.stderr)

    def _killed(self, pgid: int, exit_code: int, stderr: str) -> bool:
        if exit_code == 0:
            return False
        if exit_code == 3:
            return True
        if exit_code == 4:
            raise TransportError(f"{self.describe()}: group {pgid} still alive {KILL_AFTER_SIGKILL_S}s after SIGKILL")
        raise TransportError(f"{self.describe()}: kill_group {pgid} failed: {stderr.strip()}")

    def __enter__(self) -> Transport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def check_byte_range(offset: int, length: int | None) -> None:
    """Refuse a negative offset or length (ValueError)."""
    if offset < 0 or (length is not None and length < 0):
        raise ValueError(f"bad byte range: offset={offset} length={length}")


def _check_pgid(pgid: int) -> int:
    # `kill -- -1` signals every process we may signal, and -0 our own group: never let those through.
    if isinstance(pgid, bool) or not isinstance(pgid, int) or pgid <= 1:
        raise ValueError(f"not a process group id of a launched process: {pgid!r}")
    return pgid


@contextmanager
def map_transport_errors(action: str, *, connecting: bool = False) -> Iterator[None]:
    """Re-raise paramiko, socket, subprocess and OS errors as the most specific TransportError."""
    try:
        yield
    except TransportError:
        raise
    except Exception as exc:
        kind = _classify(exc, connecting)
        if kind is None:
            raise
        raise kind(f"{action}: {type(exc).__name__}: {exc}") from exc


def _classify(exc: Exception, connecting: bool) -> type[TransportError] | None:
    lost: type[TransportError] = ConnectFailed if connecting else ConnectionLost
    # Looked up, not imported: paramiko costs 0.3 s to import, and when it is not loaded none of
    # its exceptions can be in flight (the local transport and offline commands never load it).
    paramiko = sys.modules.get("paramiko")
    if paramiko is not None:
        if isinstance(exc, paramiko.BadHostKeyException):
            return HostKeyRejected
        if isinstance(exc, paramiko.AuthenticationException):
            return ConnectFailed
        if isinstance(exc, paramiko.SSHException):
            return HostKeyRejected if "known_hosts" in str(exc) else lost
    if isinstance(exc, subprocess.TimeoutExpired):
        return CommandTimeout
    if isinstance(exc, TimeoutError):  # socket.timeout too
        return ConnectFailed if connecting else CommandTimeout
    if isinstance(exc, (EOFError, ConnectionError, socket.gaierror)):
        return lost
    if isinstance(exc, OSError) and exc.errno is None:
        return lost  # paramiko's OSError("Socket is closed"); file errors always carry an errno
    if isinstance(exc, OSError):
        return ConnectFailed if connecting else TransportError
    return None
