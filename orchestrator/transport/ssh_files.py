"""Files over the open SFTP session: a read or a write is a few round trips, not a command on the host.

A command costs the host a session, a shell and a process per step (mkdir, mktemp, cat, chmod, mv); every
launch writes two files. The write is atomic (a temp file beside the target, then POSIX rename), its mode is
set before the first byte, so a file meant to be private is never readable by others with content in it.

SFTP's status codes carry no errno: a full disk or a file where a directory should be are both "Failure".
A failed write therefore says so (False) and leaves the caller to write by command, which names the cause.

Hardened hosts often have no SFTP subsystem at all. Then every file operation goes through the exec channel
as a small shell command (Ansible's "smart" transfer falls back from sftp to piped transfers the same way):
`read_command`/`size_command` and their parsers here, `write_command` for writes.
"""

from __future__ import annotations

import posixpath
import secrets
from contextlib import suppress

import paramiko

from orchestrator.errors import TransportError
from orchestrator.transport.base import CommandResult
from orchestrator.transport.shell import ShellCommand

PREFETCH_MIN_BYTES = 1 << 20
"""Past this, SFTP reads are pipelined instead of one 32 KiB round trip at a time."""
PIPELINE_MIN_BYTES = 1 << 16
"""From this size, writes are pipelined (not one acknowledged round trip per 32 KiB)."""
# $1 dir, $2 mode (octal), $3 path: a temp file in the same directory, then an atomic rename. Directories it
# creates are private (0700), as `_make_dirs` makes them: run directories hold logs that may echo a secret.
_WRITE = """(umask 077 && mkdir -p -- "$1") && t=$(mktemp "$1/.orch-write.XXXXXX") || exit 1
if cat > "$t" && chmod "$2" "$t" && mv -f -- "$t" "$3"; then exit 0; fi
rm -f -- "$t"; exit 1"""
_MISSING = 3
"""Exit status of the shell reads for "no such file" (also a /proc entry whose process exited meanwhile)."""
# $1 path, $2 1-based offset, $3 length ("" for all). A file gone mid-read (a /proc entry of a process that
# exited meanwhile) is "missing", not a failure; one that cannot be read says so, since the pipe hides tail's failure.
_READ = """[ -e "$1" ] || exit 3
[ -d "$1" ] && { echo "$1: is a directory" >&2; exit 1; }
[ -r "$1" ] || { echo "$1: permission denied" >&2; exit 1; }
if [ -n "$3" ]; then tail -c +"$2" -- "$1" | head -c "$3"; else tail -c +"$2" -- "$1"; fi && exit 0
[ -e "$1" ] || exit 3
exit 1"""
_SIZE = """[ -e "$1" ] || exit 3
wc -c < "$1" """


def sftp_read(sftp: paramiko.SFTPClient, path: str, offset: int, length: int | None) -> bytes | None:
    """`length` bytes of `path` from `offset` (None: to its end); None when the file does not exist."""
    try:
        with sftp.open(path, "rb") as f:
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
    except FileNotFoundError:
        return None
    except OSError as exc:
        # SFTP's "Failure" has no errno, like a dead socket; a /proc/<pid>/stat whose process exits between
        # the open and the read fails that way too. The channel says which; a file gone meanwhile is missing.
        _raise_if_connection_lost(exc, sftp)
        try:
            sftp.stat(path)
        except FileNotFoundError:
            return None
        raise TransportError(f"cannot read {path}: {exc}") from exc


def write_command(path: str, mode: int) -> str:
    """The shell command that writes its stdin to `path` as `sftp_write` does, for when SFTP cannot say why not."""
    parent = posixpath.dirname(path) or "."
    return ShellCommand("sh", "-c", _WRITE, "orchestrator-write", parent, f"{mode:o}", path).raw()


def read_command(path: str, offset: int, length: int | None) -> str:
    """The shell command that prints `length` bytes of `path` from `offset` (for a host without SFTP)."""
    size = "" if length is None else str(length)
    return ShellCommand("sh", "-c", _READ, "orchestrator-read", path, offset + 1, size).raw()


def size_command(path: str) -> str:
    """The shell command that prints the size of `path` (for a host without SFTP)."""
    return ShellCommand("sh", "-c", _SIZE, "orchestrator-size", path).raw()


def read_result(result: CommandResult, path: str, where: str) -> bytes | None:
    """What `read_command` read: the bytes, or None when the file does not exist (or vanished meanwhile)."""
    if result.exit_code == _MISSING:
        return None
    if not result.ok:
        raise TransportError(f"{where}: cannot read {path}: {result.stderr_text.strip() or result.exit_code}")
    return result.stdout


def size_result(result: CommandResult, path: str, where: str) -> int | None:
    """What `size_command` found: the size in bytes, or None when the file does not exist."""
    data = read_result(result, path, where)
    if data is None:
        return None
    text = data.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise TransportError(f"{where}: cannot tell the size of {path}: {result.stderr_text.strip() or text!r}")
    return int(text)


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
    """`mkdir -p` over SFTP: create each missing directory (0700) from the first that exists."""
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
            sftp.mkdir(each, mode=0o700)
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
