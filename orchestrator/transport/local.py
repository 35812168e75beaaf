"""LocalTransport: the transport contract on this machine, through subprocess and plain file I/O."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import suppress

from orchestrator.errors import CommandTimeout
from orchestrator.transport.base import CommandResult, Transport, check_byte_range, map_transport_errors
from orchestrator.transport.launch import LAUNCH_TIMEOUT_S, LaunchRequest


class LocalTransport(Transport):
    """Drive this machine as if it were a remote host (same commands, same launch wrapper)."""

    def run(
        self, command: str, timeout: float = 30.0, stdin: bytes | None = None, *, idempotent: bool = True
    ) -> CommandResult:
        """Run `command` with `sh -c`; on timeout its whole process group is killed (CommandTimeout)."""
        with map_transport_errors(f"local: run {command[:80]!r}"):
            # A session of its own, as sshd gives each command, so a timeout can kill its children too.
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                # A grandchild in another session may still hold the pipes: do not wait on it long.
                with suppress(subprocess.TimeoutExpired):
                    proc.communicate(timeout=1.0)
                raise CommandTimeout(f"local: {command[:80]!r} still running after {timeout}s (killed)") from None
        return CommandResult(proc.returncode, out, err)

    def start_detached(
        self,
        command: str,
        log_path: str,
        pid_path: str,
        cwd: str | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> int:
        """Start `command` detached (see Transport.start_detached); secrets go through stdin here too."""
        request = LaunchRequest.build(command, log_path, pid_path, cwd, secrets)
        return request.parse(self.run(request.command, LAUNCH_TIMEOUT_S, request.stdin, idempotent=False))

    def read_range(self, path: str, offset: int, length: int | None = None) -> bytes:
        """Raw bytes of `path` from `offset`; b"" if the file does not exist."""
        check_byte_range(offset, length)
        with map_transport_errors(f"local: read {path}"):
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    return f.read(-1 if length is None else length)
            except (FileNotFoundError, ProcessLookupError):
                # ESRCH: a /proc/<pid> file whose process exited between the open and the read is gone, too.
                return b""

    def file_size(self, path: str) -> int | None:
        """Size of `path`, or None if it does not exist."""
        with map_transport_errors(f"local: stat {path}"):
            try:
                return os.stat(path).st_size
            except FileNotFoundError:
                return None

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write `path` atomically with `mode`, creating parent directories."""
        payload = data.encode() if isinstance(data, str) else data
        parent = os.path.dirname(path) or "."
        with map_transport_errors(f"local: write {path}"):
            _make_private_dirs(parent)
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".orch-write.")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(payload)
                    os.fchmod(f.fileno(), mode)
                os.replace(tmp, path)
            except BaseException:
                with suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise

    def close(self) -> None:
        """Nothing to release."""

    def describe(self) -> str:
        """`local`."""
        return "local"


def _make_private_dirs(directory: str) -> None:
    """`mkdir -p` whose new directories are 0700 (os.makedirs gives its mode to the last one only)."""
    missing: list[str] = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for each in reversed(missing):
        with suppress(FileExistsError):  # made meanwhile by another writer
            os.mkdir(each, 0o700)
