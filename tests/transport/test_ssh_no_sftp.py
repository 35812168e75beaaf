"""A host without an SFTP subsystem (hardened sshd_config): files go through the exec channel, said once, and the
connection is never taken for lost (issue 33 broken 9). And a /proc/<pid>/stat read that races the process's exit
is a missing file, not a lost connection (issue 33, weak)."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest

from orchestrator.errors import TransportError
from orchestrator.host.launcher import leads_group
from orchestrator.transport import open_transport
from orchestrator.transport.ssh import SshTransport
from orchestrator.transport.ssh_files import sftp_read
from tests.sshd_host import SshdHost, login_user

pytestmark = pytest.mark.ssh


@pytest.fixture
def no_sftp(sshd: SshdHost) -> Iterator[SshdHost]:
    """An sshd of this test whose config has no `Subsystem sftp` line."""
    host = SshdHost(login_user(), sftp=False).start()
    yield host
    host.cleanup()


def test_files_go_through_the_shell_said_once_and_nothing_reconnects(
    no_sftp: SshdHost, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert "Subsystem" not in (no_sftp.dir / "sshd_config").read_text()
    data = bytes(range(256)) * 3 + b"\n\0tail"
    target = tmp_path / "deep" / "dir" / "blob"
    caplog.set_level(logging.WARNING)
    with open_transport(no_sftp.target()) as t:
        t.write_file(str(target), data, mode=0o600)
        assert target.read_bytes() == data and (target.stat().st_mode & 0o777) == 0o600
        assert t.read_range(str(target), 0) == data
        assert t.read_range(str(target), 5, 300) == data[5:305]
        assert t.read_range(str(target), len(data) - 4) == b"tail"
        assert t.read_range(str(target), len(data) + 10) == b""
        assert t.file_size(str(target)) == len(data)
        assert t.read_range(str(tmp_path / "missing"), 0) == b"" and t.file_size(str(tmp_path / "missing")) is None
        stat = t.read_range(f"/proc/{os.getpid()}/stat", 0, 4096)
        assert stat.startswith(f"{os.getpid()} (".encode())
        pgid = t.start_detached("echo started; sleep 30", str(tmp_path / "log"), str(tmp_path / "pid"))
        try:
            assert t.read_range(str(tmp_path / "pid"), 0).strip() == str(pgid).encode()
            assert leads_group(t.read_range(f"/proc/{pgid}/stat", 0, 4096), pgid)
        finally:
            assert t.kill_group(pgid, grace_s=2) is False
    messages = [r.getMessage() for r in caplog.records]
    absent = [m for m in messages if "no SFTP subsystem" in m]
    assert len(absent) == 1, messages
    assert not [m for m in messages if "reconnecting" in m], messages
    assert no_sftp.accepted_logins() == 1  # one connection throughout: nothing was taken for a drop


def test_a_folder_read_as_a_file_is_an_error_not_a_drop_or_empty(no_sftp: SshdHost, tmp_path: Path) -> None:
    with open_transport(no_sftp.target()) as t:
        for length in (None, 10):
            with pytest.raises(TransportError, match="is a directory"):
                t.read_range(str(tmp_path), 0, length)


def test_proc_stat_read_racing_the_exit_is_missing_not_a_lost_connection(
    sshd: SshdHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process exits (and is reaped) between the SFTP open and the read: the server answers "Failure"."""
    proc = subprocess.Popen(["sleep", "60"])
    t = SshTransport(sshd.target())
    with t:
        sftp = t._sftp()  # the real SFTP session of a real connection
        assert sftp is not None
        real_open = sftp.open

        def open_then_exit(path: str, mode: str = "r", *args: Any) -> paramiko.SFTPFile:
            handle: paramiko.SFTPFile = real_open(path, mode, *args)
            proc.kill()
            proc.wait()
            return handle

        monkeypatch.setattr(sftp, "open", open_then_exit)
        assert sftp_read(sftp, f"/proc/{proc.pid}/stat", 0, 4096) is None
        monkeypatch.undo()
        assert t.read_range(f"/proc/{proc.pid}/stat", 0, 4096) == b""
        assert t.run("echo still").text == "still\n" and t.connection_epoch == 1


def test_local_proc_stat_read_racing_the_exit_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    real_open = open

    def open_then_exit(path: str, *args: Any, **kwargs: Any) -> Any:
        handle = real_open(path, *args, **kwargs)
        if path == f"/proc/{proc.pid}/stat":
            proc.kill()
            proc.wait()
        return handle

    monkeypatch.setattr("builtins.open", open_then_exit)
    with open_transport("local") as t:
        assert t.read_range(f"/proc/{proc.pid}/stat", 0, 4096) == b""
