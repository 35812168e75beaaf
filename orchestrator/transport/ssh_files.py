"""Files over the open SFTP session: a read or a write is a few round trips, not a command on the host.

A command costs the host a session, a shell and a process per step (mkdir, mktemp, cat, chmod, mv); every
launch writes two files. The write is atomic (a temp file beside the target, then POSIX rename), its mode is
set before the first byte, so a file meant to be private is never readable by others with content in it.

SFTP's status codes carry no errno: a full disk or a file where a directory should be are both "Failure".
A failed write therefore says so (False) and leaves the caller to write by command, which names the cause.
"""

from __future__ import annotations

import posixpath
import secrets
from contextlib import suppress

import paramiko

from orchestrator.transport.shell import ShellCommand

PREFETCH_MIN_BYTES = 1 << 20
"""Past this, SFTP reads are pipelined instead of one 32 KiB round trip at a time."""
PIPELINE_MIN_BYTES = 1 << 16
"""From this size, writes are pipelined (not one acknowledged round trip per 32 KiB)."""
# $1 dir, $2 mode (octal), $3 path: a temp file in the same directory, then an atomic rename.
_WRITE = """mkdir -p -- "$1" && t=$(mktemp "$1/.orch-write.XXXXXX") || exit 1
if cat > "$t" && chmod "$2" "$t" && mv -f -- "$t" "$3"; then exit 0; fi
rm -f -- "$t"; exit 1"""


def sftp_read(sftp: paramiko.SFTPClient, path: str, offset: int, length: int | None) -> bytes | None:
    """`length` bytes of `path` from `offset` (None: to its end); None when the file does not exist."""
    try:
        f = sftp.open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        wanted = length
        if wanted is None or wanted >= PREFETCH_MIN_BYTES:
            available = max((f.stat().st_size or 0) - offset, 0)
            wanted = available if wanted is None else min(wanted, available)
        if wanted == 0:
            return b""
        f.seek(offset)
        if wanted >= PREFETCH_MIN_BYTES:
            f.prefetch(offset + wanted)
        data: bytes = f.read(wanted)
        return data


def write_command(path: str, mode: int) -> str:
    """The shell command that writes its stdin to `path` as `sftp_write` does, for when SFTP cannot say why not."""
    parent = posixpath.dirname(path) or "."
    return ShellCommand("sh", "-c", _WRITE, "orchestrator-write", parent, f"{mode:o}", path).raw()


def sftp_write(sftp: paramiko.SFTPClient, path: str, payload: bytes, mode: int) -> bool:
    """Write `path` with `mode` atomically, creating its parents; False when the host refused a file operation.

    A dropped connection is raised (paramiko's SSHException or an OSError without errno), as for any read.
    """
    parent = posixpath.dirname(path) or "."
    temp = posixpath.join(parent, f".orch-write.{secrets.token_hex(6)}")
    try:
        try:
            handle = sftp.open(temp, "wbx")
        except FileNotFoundError:
            _make_dirs(sftp, parent)
            handle = sftp.open(temp, "wbx")
    except OSError as exc:
        _raise_if_connection_lost(exc, sftp)
        return False
    try:
        with handle:
            handle.chmod(mode)
            handle.set_pipelined(len(payload) >= PIPELINE_MIN_BYTES)
            handle.write(payload)
        sftp.posix_rename(temp, path)
    except OSError as exc:
        _raise_if_connection_lost(exc, sftp)
        with suppress(OSError):
            sftp.remove(temp)
        return False
    return True


def _make_dirs(sftp: paramiko.SFTPClient, directory: str) -> None:
    """`mkdir -p` over SFTP: create each missing directory from the first that exists."""
    missing: list[str] = []
    while directory not in ("", "/", "."):
        try:
            sftp.stat(directory)
            break
        except FileNotFoundError:
            missing.append(directory)
            directory = posixpath.dirname(directory)
    for each in reversed(missing):
        try:
            sftp.mkdir(each)
        except OSError:
            sftp.stat(each)  # made meanwhile by somebody else is fine; anything else raises here


def _raise_if_connection_lost(exc: OSError, sftp: paramiko.SFTPClient) -> None:
    """Re-raise `exc` when it is the connection that failed, not the host refusing a file operation: SFTP's
    "Failure" carries no errno, like paramiko's "Socket is closed", so the channel is asked."""
    channel = sftp.get_channel()
    transport = channel.get_transport() if channel is not None else None
    alive = channel is not None and not channel.closed and transport is not None and transport.is_active()
    if exc.errno is None and not alive:
        raise exc
