"""One contract, two transports: every operation behaves the same locally and over SSH to a loopback sshd, also to
one without an SFTP subsystem (files then go through the exec channel).

The loopback host is this machine, so the tests check the host's side directly (/proc, os.getpgid).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.errors import CommandTimeout, LaunchError
from orchestrator.secret import MASK
from orchestrator.transport import ShellCommand, Transport, open_transport
from tests.sshd_host import SshdHost, login_user


@pytest.fixture(scope="module", params=["local", "ssh", "ssh-no-sftp"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    """The transport under test; the SSH one reuses its connection across the module."""
    if request.param == "ssh-no-sftp":
        request.getfixturevalue("sshd")  # skipped (failed under CI) like the others without OpenSSH
        host = SshdHost(login_user(), sftp=False).start()
        try:
            with open_transport(host.target()) as t:
                yield t
        finally:
            host.cleanup()
        return
    t = open_transport("local" if request.param == "local" else request.getfixturevalue("ssh_target"))
    yield t
    t.close()


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups a test launched; whatever is left of them is killed afterwards."""
    pgids: list[int] = []
    yield pgids
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group `pgid`, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_describe(transport: Transport) -> None:
    assert transport.describe() == "local" or transport.describe().startswith("ssh ")


def test_run_returns_exit_code_and_raw_bytes(transport: Transport) -> None:
    result = transport.run(r"printf 'a\377b\000c'; printf 'oops' >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, b"a\xffb\x00c", b"oops")
    assert not result.ok and result.text == "a\ufffdb\x00c"


def test_run_is_sh_without_pty(transport: Transport) -> None:
    result = transport.run('[ -t 0 ] || [ -t 1 ] && echo tty || echo notty; echo "$((6 * 7))"')
    assert result.stdout == b"notty\n42\n"


def test_run_feeds_stdin_bytes(transport: Transport) -> None:
    data = bytes(range(256)) * 100
    assert transport.run("cat", stdin=data).stdout == data
    assert transport.run("cat").stdout == b""  # no stdin: EOF at once, never a hang


def test_run_timeout_raises_and_kills_the_command(transport: Transport, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        transport.run(f"echo $$ > {pid_file}; exec sleep 30", timeout=0.3)
    assert time.monotonic() - started < 2.0
    pid = int(pid_file.read_text())
    _wait_for(lambda: _state(pid) in (None, "Z"), timeout=5.0)  # the host kills it too


def test_start_detached_survives_close_in_its_own_group(
    transport: Transport, tmp_path: Path, groups: list[int]
) -> None:
    run_dir = tmp_path / "run dir"  # a space, to prove paths are quoted
    log = run_dir / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"earlier line\n")
    started = time.monotonic()
    pid = transport.start_detached(
        "echo started in $(pwd); readlink /proc/$$/fd/0; exec sleep 30", str(log), str(run_dir / "pid"),
        cwd=str(run_dir),
    )  # fmt: skip
    launch_s = time.monotonic() - started
    groups.append(pid)
    assert launch_s < 1.0, f"launch took {launch_s:.3f}s"
    assert (run_dir / "pid").read_text().strip() == str(pid)  # already there when the call returns
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid
    transport.close()
    time.sleep(0.05)
    assert transport.group_alive(pid)  # reopens the connection
    _wait_for(lambda: log.read_bytes().count(b"\n") >= 3)
    assert log.read_bytes() == f"earlier line\nstarted in {run_dir}\n/dev/null\n".encode()


def test_start_detached_refuses_an_existing_pid_file(transport: Transport, tmp_path: Path) -> None:
    (tmp_path / "pid").write_text("12345\n")
    with pytest.raises(LaunchError, match="already launched"):
        transport.start_detached("echo never", str(tmp_path / "log"), str(tmp_path / "pid"))
    assert not (tmp_path / "log").exists()


def test_start_detached_reports_a_bad_cwd(transport: Transport, tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="working directory"):
        transport.start_detached("true", "log", "pid", cwd=str(tmp_path / "missing"))


SECRET = "s3cr3t value with 'quotes', \"dq\", $(touch canary) and\na newline\n"


def _proc_cmdlines() -> list[bytes]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                found.append(Path(f"/proc/{entry}/cmdline").read_bytes())
    return found


def test_secrets_reach_the_environment_and_nothing_else(
    transport: Transport, tmp_path: Path, groups: list[int]
) -> None:
    forms = [SECRET.encode(), base64.b64encode(SECRET.encode()), b"s3cr3t"]
    seen: list[bytes] = []
    done = threading.Event()

    def watch() -> None:  # every command line on the machine, as often as we can, during the launch
        while not done.is_set():
            seen.extend(c for c in _proc_cmdlines() if any(f in c for f in forms))

    watcher = threading.Thread(target=watch)
    watcher.start()
    run_dir = tmp_path / "run"
    command = ShellCommand("exec", "sleep", "30")
    try:
        pid = transport.start_detached(
            command.raw(), str(run_dir / "server.log"), str(run_dir / "pid"), cwd=str(tmp_path),
            secrets={"HF_TOKEN": SECRET, "EMPTY_SECRET": ""},
        )  # fmt: skip
        groups.append(pid)
        transport.write_file(str(run_dir / "cmd.sh"), f"HF_TOKEN={MASK} " + str(command))
        time.sleep(0.05)
    finally:
        done.set()
        watcher.join()
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"HF_TOKEN=" + SECRET.encode() in environ and b"EMPTY_SECRET=" in environ
    assert not (tmp_path / "canary").exists()
    assert seen == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, check=True).stdout
    assert not any(f in ps for f in forms)
    for path in run_dir.rglob("*"):
        assert not any(f in path.read_bytes() for f in forms), path
    assert (run_dir / "cmd.sh").read_text() == "HF_TOKEN=*** exec sleep 30"


def test_read_range_returns_raw_bytes_at_any_offset(transport: Transport, tmp_path: Path) -> None:
    data = "naïve café ✓\n".encode() + b"\xff\xfe\x00not utf-8\x80\n" + b"tail"
    path = tmp_path / "log.bin"
    path.write_bytes(data)
    assert transport.read_range(str(path), 0) == data
    assert transport.read_range(str(path), 3, 5) == data[3:8]  # starts inside a UTF-8 sequence
    assert transport.read_range(str(path), 17, 3) == data[17:20]
    assert transport.read_range(str(path), len(data) - 4) == b"tail"
    assert transport.read_range(str(path), len(data)) == b""
    assert transport.read_range(str(path), len(data) + 100, 10) == b""
    assert transport.read_range(str(path), 5, 0) == b""
    assert transport.file_size(str(path)) == len(data)
    assert transport.read_range(str(tmp_path / "missing"), 0) == b""
    assert transport.file_size(str(tmp_path / "missing")) is None
    with pytest.raises(ValueError):
        transport.read_range(str(path), -1)


def test_read_range_of_a_large_file(transport: Transport, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "big.log"
    path.write_bytes(data)
    assert transport.read_range(str(path), 1000, 2 * 1024 * 1024) == data[1000 : 1000 + 2 * 1024 * 1024]
    assert transport.read_range(str(path), 4096) == data[4096:]


def test_write_file_is_atomic_and_creates_parents(transport: Transport, tmp_path: Path) -> None:
    path = tmp_path / "a" / "b c" / "cmd.sh"
    transport.write_file(str(path), b"\x00\xffbinary", mode=0o600)
    assert path.read_bytes() == b"\x00\xffbinary" and path.stat().st_mode & 0o777 == 0o600
    transport.write_file(str(path), "#!/bin/sh\necho ✓\n", mode=0o755)
    assert path.read_text() == "#!/bin/sh\necho ✓\n" and path.stat().st_mode & 0o777 == 0o755
    transport.write_file(str(path), b"")
    assert path.read_bytes() == b""
    assert sorted(p.name for p in path.parent.iterdir()) == ["cmd.sh"]  # no temp file left behind
    # Directories it had to make are private: a run directory's log may echo a secret (issue 33).
    assert [(d.stat().st_mode & 0o777) for d in (tmp_path / "a", path.parent)] == [0o700, 0o700]


def test_start_detached_makes_its_directories_and_files_private(
    transport: Transport, tmp_path: Path, groups: list[int]
) -> None:
    run_dir = tmp_path / "runs" / "r-1"
    log, pid_file = run_dir / "server.log", run_dir / "pid"
    pid = transport.start_detached("umask; echo up", str(log), str(pid_file), cwd=str(tmp_path))
    groups.append(pid)
    _wait_for(lambda: b"up" in log.read_bytes())
    modes = [p.stat().st_mode & 0o777 for p in (tmp_path / "runs", run_dir, log, pid_file)]
    assert modes == [0o700, 0o700, 0o600, 0o600]
    assert log.read_text().split()[0] != "0077"  # the job keeps the login's own umask (its caches stay shared)


def test_group_alive_ignores_zombies_and_dead_groups(transport: Transport) -> None:
    zombie = subprocess.Popen(["true"], start_new_session=True)  # never waited for until the end
    try:
        _wait_for(lambda: _state(zombie.pid) == "Z")
        os.kill(zombie.pid, 0)  # what kill -0 would say: "alive"
        assert not transport.group_alive(zombie.pid)
    finally:
        zombie.wait()
    assert not transport.group_alive(zombie.pid)
    with pytest.raises(ValueError):
        transport.group_alive(1)


def test_kill_group_of_nothing_but_zombies_ends_without_waiting_out_the_grace(transport: Transport) -> None:
    zombie = subprocess.Popen(["true"], start_new_session=True)  # its group lives on as a zombie until waited for
    try:
        _wait_for(lambda: _state(zombie.pid) == "Z")
        started = time.monotonic()
        assert transport.kill_group(zombie.pid, grace_s=5.0) is False
        assert time.monotonic() - started < 2.0  # seen dead, not waited on for the whole grace
    finally:
        zombie.wait()


def test_kill_group_kills_children_too(transport: Transport, tmp_path: Path, groups: list[int]) -> None:
    pid = transport.start_detached("sleep 30 & sleep 30 & wait", str(tmp_path / "log"), str(tmp_path / "pid"))
    groups.append(pid)
    _wait_for(lambda: len(_members(pid)) == 3)
    assert transport.group_alive(pid)
    assert transport.kill_group(pid, grace_s=5.0) is False  # went on SIGTERM
    assert _members(pid) == [] and not transport.group_alive(pid)


def test_kill_group_then_runs_the_command_once_the_group_is_gone(
    transport: Transport, tmp_path: Path, groups: list[int]
) -> None:
    pid = transport.start_detached("sleep 30 & wait", str(tmp_path / "log"), str(tmp_path / "pid"))
    groups.append(pid)
    _wait_for(lambda: len(_members(pid)) == 2)
    # The command sees the group gone (no member left) and its own output and exit code come back.
    then = f"ps -eo pgid=,stat= | awk '$1 == {pid} && $2 !~ /^Z/' | wc -l; echo 'it said: x y'; exit 7"
    sigkilled, result = transport.kill_group_then(pid, 5.0, then)
    assert sigkilled is False and _members(pid) == []
    assert result.exit_code == 7 and result.text.split() == ["0", "it", "said:", "x", "y"]
    sigkilled, result = transport.kill_group_then(pid, 5.0, "echo again")  # already gone: just the command
    assert sigkilled is False and result.ok and result.text == "again\n"


def test_kill_group_escalates_to_sigkill(transport: Transport, tmp_path: Path, groups: list[int]) -> None:
    # An ignored SIGTERM is inherited by the children, so the whole group ignores it.
    pid = transport.start_detached("trap '' TERM; sleep 30 & wait", str(tmp_path / "log"), str(tmp_path / "pid"))
    groups.append(pid)
    _wait_for(lambda: len(_members(pid)) == 2)
    started = time.monotonic()
    assert transport.kill_group(pid, grace_s=0.1) is True
    assert time.monotonic() - started < 2.0
    assert _members(pid) == []
    assert transport.kill_group(pid) is False  # already gone


def test_signal_group_delivers_and_tolerates_gone_groups(
    transport: Transport, tmp_path: Path, groups: list[int]
) -> None:
    pid = transport.start_detached("exec sleep 30", str(tmp_path / "log"), str(tmp_path / "pid"))
    groups.append(pid)
    transport.signal_group(pid, signal.SIGTERM)
    _wait_for(lambda: _members(pid) == [])
    transport.signal_group(pid, signal.SIGTERM)  # gone: not an error
    transport.signal_group(pid, signal.SIGKILL)
    for bad in (0, 1, -4):
        with pytest.raises(ValueError):
            transport.signal_group(bad, signal.SIGTERM)
