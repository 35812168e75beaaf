"""What only the SSH transport does: host keys, ssh config aliases, reuse and recovery, quoting over the wire."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tenacity import stop_after_attempt, wait_none

from orchestrator.errors import ConnectFailed, ConnectionLost, HostKeyRejected
from orchestrator.transport import Raw, ShellCommand, SshTarget, open_transport, ssh, ssh_channel
from orchestrator.transport.ssh import SshTransport
from tests.sshd_host import SshdHost, login_user

OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKxQ2F0i8yBkt1dXyF3cvT7qJw1jxvB9ZD7cW9u0z1c3"


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconnect policy short enough for tests that exhaust it."""
    monkeypatch.setattr(ssh, "RETRY_STOP", stop_after_attempt(2))
    monkeypatch.setattr(ssh, "RETRY_WAIT", wait_none())


@pytest.fixture
def transport(ssh_target: SshTarget) -> Iterator[SshTransport]:
    """A fresh SSH transport to the session's sshd."""
    t = SshTransport(ssh_target)
    yield t
    t.close()


def test_unknown_host_key_is_refused_with_how_to(sshd: SshdHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    logins = sshd.accepted_logins()
    with pytest.raises(HostKeyRejected) as caught, open_transport(sshd.target(known_hosts=str(known))) as t:
        t.run("true")
    message = str(caught.value)
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {known}" in message
    assert "accept_new_host_keys: true" in message and "SHA256:" in message
    assert known.read_text() == "" and sshd.accepted_logins() == logins  # nothing sent, nothing added


def test_changed_host_key_is_refused_even_with_accept_new(sshd: SshdHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {OTHER_KEY}\n")
    for accept_new in (False, True):
        target = sshd.target(known_hosts=str(known), accept_new_host_keys=accept_new)
        with pytest.raises(HostKeyRejected, match="CHANGED") as caught, open_transport(target) as t:
            t.run("true")
        assert "ssh-keygen -R" in str(caught.value)
    assert known.read_text() == f"[127.0.0.1]:{sshd.port} {OTHER_KEY}\n"


def test_accept_new_adds_the_key_then_it_is_known(sshd: SshdHost, tmp_path: Path) -> None:
    known = tmp_path / "fresh" / "known_hosts"  # neither the file nor its directory exist yet
    with open_transport(sshd.target(known_hosts=str(known), accept_new_host_keys=True)) as t:
        assert t.run("echo ok").stdout == b"ok\n"
    assert known.read_text() == sshd.host_key_line()
    with open_transport(sshd.target(known_hosts=str(known))) as t:  # strict again: now known
        assert t.run("echo ok").stdout == b"ok\n"


def test_alias_from_ssh_config(sshd: SshdHost, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host orch-loopback\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    with open_transport(SshTarget("orch-loopback", ssh_config_path=str(config))) as t:
        assert t.describe() == f"ssh orch-loopback ({sshd.user}@127.0.0.1:{sshd.port})"
        assert t.run("echo via alias").stdout == b"via alias\n"


def test_wrong_client_key_or_no_listener_is_connect_failed(sshd: SshdHost, tmp_path: Path) -> None:
    with pytest.raises(ConnectFailed) as caught, open_transport(sshd.target(key_filename=str(sshd.host_key))) as t:
        t.run("true")
    assert not isinstance(caught.value, HostKeyRejected)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: refused at once, and not retried
    started = time.monotonic()
    with pytest.raises(ConnectFailed), open_transport(sshd.target(port=port)) as t:
        t.run("true")
    assert time.monotonic() - started < 1.0


def _sock(t: SshTransport) -> socket.socket:
    sock: Any = t._connection().transport.sock
    assert isinstance(sock, socket.socket)
    return sock


def test_connection_is_reused_with_tcp_nodelay(sshd: SshdHost, transport: SshTransport, tmp_path: Path) -> None:
    logins = sshd.accepted_logins()
    for i in range(20):
        assert transport.run(f"echo {i}").stdout == f"{i}\n".encode()
    transport.write_file(str(tmp_path / "f"), b"x")
    assert transport.read_range(str(tmp_path / "f"), 0) == b"x" and transport.file_size(str(tmp_path / "f")) == 1
    assert sshd.accepted_logins() == logins + 1
    assert _sock(transport).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    sshd.kill_connections()
    transport.run("true")
    assert _sock(transport).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0  # the new socket too


def test_dropped_connection_is_reopened_transparently(sshd: SshdHost, transport: SshTransport, tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"0123456789")
    transport.run("true")
    operations: list[Callable[[], bool]] = [
        lambda: transport.run("echo back").stdout == b"back\n",
        lambda: transport.read_range(str(tmp_path / "log"), 4, 3) == b"456",
        lambda: transport.file_size(str(tmp_path / "log")) == 10,
        lambda: transport.group_alive(os.getpgid(0)),
    ]
    for operation in operations:
        logins = sshd.accepted_logins()
        assert sshd.kill_connections()
        assert operation()
        assert sshd.accepted_logins() == logins + 1


def test_drop_during_a_command_reruns_it_only_if_idempotent(sshd: SshdHost, transport: SshTransport) -> None:
    transport.run("true")
    threading.Timer(0.1, sshd.kill_connections).start()
    assert transport.run("sleep 0.3; echo done").stdout == b"done\n"  # re-run on a new connection
    threading.Timer(0.1, sshd.kill_connections).start()
    with pytest.raises(ConnectionLost):
        transport.run("sleep 0.3; echo once", idempotent=False)


def test_sshd_restart_is_survived_and_a_dead_host_reported(fast_retries: None) -> None:
    own = SshdHost(login_user())
    own.start()
    try:
        t = SshTransport(own.target())
        assert t.run("echo 1").stdout == b"1\n"
        own.restart()
        assert t.run("echo 2").stdout == b"2\n"
        own.stop()
        with pytest.raises((ConnectFailed, ConnectionLost)):
            t.run("echo 3")
        t.close()
    finally:
        own.cleanup()


def _launch_with_drop(
    sshd: SshdHost, transport: SshTransport, run_dir: Path, monkeypatch: pytest.MonkeyPatch, *, after_launch: bool
) -> int:
    """Launch while the connection drops once: after the job started (reply lost) or as soon as the command is sent."""
    real_collect = ssh_channel.collect
    drops: list[int] = []

    def collect_with_drop(*args: Any) -> Any:
        if drops:
            return real_collect(*args)
        if after_launch:
            deadline = time.monotonic() + 5
            while not (run_dir / "pid").exists() or not (run_dir / "pid").read_bytes().strip():
                assert time.monotonic() < deadline
                time.sleep(0.002)
        drops.extend(sshd.kill_connections())
        if after_launch:  # the reply may already be on its way: lose it for certain
            raise ConnectionLost("test: reply lost")
        return real_collect(*args)

    transport.run("true")
    monkeypatch.setattr(ssh, "collect", collect_with_drop)
    pid = transport.start_detached(
        "echo launched; exec sleep 30", str(run_dir / "log"), str(run_dir / "pid"), secrets={"A_TOKEN": "t"}
    )
    assert drops, "the connection was never dropped"
    return pid


@pytest.mark.parametrize("after_launch", [True, False], ids=["reply-lost", "dropped-at-once"])
def test_launch_interrupted_by_a_drop_starts_exactly_once(
    sshd: SshdHost, transport: SshTransport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture, after_launch: bool,
) -> None:  # fmt: skip
    pid = _launch_with_drop(sshd, transport, tmp_path, monkeypatch, after_launch=after_launch)
    try:
        assert pid == int((tmp_path / "pid").read_text())
        assert os.getpgid(pid) == pid
        time.sleep(0.2)  # a second launch, had there been one, would have logged by now
        assert (tmp_path / "log").read_text() == "launched\n"
        if after_launch:
            assert "recovered pid" in caplog.text
    finally:
        os.killpg(pid, signal.SIGKILL)


PAYLOADS = [
    "$(touch {canary})", "`touch {canary}`", "; touch {canary}", "&& touch {canary}", "| touch {canary}",
    "|| touch {canary}", "'; touch {canary}; '", '"; touch {canary}; "', "\ntouch {canary}\n", "\\$(touch {canary})",
    "$((1+1))", "${{HOME}}", "$HOME", "*", "/*", "?", "[a-z]*", "~", "~root", "-rf", "--help", "-", "a\tb",
    "> {canary}", "< /etc/passwd", "& touch {canary} &", "!$", "{{a,b}}", "#comment", "", " ", "ünïcødé ✓ 日本",
    "it's", 'say "hi"', "\\", "\\n", "$'\\x41'", "%s%n", "\x1b[31mred",
]  # fmt: skip


def test_injection_payloads_arrive_literally(sshd: SshdHost, transport: SshTransport, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    payloads = [p.format(canary=canary) for p in PAYLOADS]
    result = transport.run(ShellCommand("printf", "%s\\0", *payloads).raw())
    assert result.ok and result.stdout.decode().split("\0")[:-1] == payloads

    out = tmp_path / "out dir" / "args"
    out.parent.mkdir()
    command = ShellCommand("printf", "%s\\0", *payloads, Raw(">"), out, Raw('; printf %s "$PAYLOAD" >>'), out)
    pid = transport.start_detached(
        command.raw(), str(tmp_path / "log"), str(tmp_path / "pid"), cwd=str(tmp_path),
        secrets={"PAYLOAD": payloads[0] + payloads[8]},
    )  # fmt: skip
    deadline = time.monotonic() + 5
    while transport.group_alive(pid):
        assert time.monotonic() < deadline
    log = (tmp_path / "log").read_text()
    assert out.read_bytes().decode().split("\0") == [*payloads, payloads[0] + payloads[8]], log
    assert not canary.exists()


def test_proxy_command_from_ssh_config_carries_the_connection(sshd: SshdHost, tmp_path: Path) -> None:
    """`ProxyCommand ssh -W %h:%p` through the loopback sshd itself; its log shows both logins."""
    config = tmp_path / "ssh_config"
    hop = (
        f"ssh -q -F none -i {sshd.client_key} -o IdentitiesOnly=yes -o UserKnownHostsFile={sshd.known_hosts} "
        f"-o StrictHostKeyChecking=yes -o BatchMode=yes -p {sshd.port} {sshd.user}@127.0.0.1 -W %h:%p"
    )
    config.write_text(
        f"Host orch-proxied\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n  ProxyCommand {hop}\n"
    )
    before = sshd.log.read_bytes().count(b"Accepted publickey")
    with open_transport(SshTarget("orch-proxied", ssh_config_path=str(config))) as t:
        assert t.run("echo via proxy").stdout == b"via proxy\n"
    # Two logins, not one: the proxy's own (`ssh -W`) and ours through its forwarded channel.
    assert sshd.log.read_bytes().count(b"Accepted publickey") == before + 2


@pytest.mark.parametrize("jump", ["orch-bastion", "orch-bastion,orch-bastion2"])
def test_proxy_jump_goes_through_the_bastion(sshd: SshdHost, tmp_path: Path, jump: str) -> None:
    """ProxyJump one hop and a chain: each hop is a login on the bastion, the target's login comes through it."""
    config = tmp_path / "ssh_config"
    common = (
        f"  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    config.write_text(
        f"Host gpu-box\n  ProxyJump {jump}\n{common}Host orch-bastion\n{common}Host orch-bastion2\n{common}"
    )
    before = sshd.log.read_bytes().count(b"Accepted publickey")
    with open_transport(SshTarget("gpu-box", ssh_config_path=str(config))) as t:
        assert t.run("echo via jump").stdout == b"via jump\n"
    assert sshd.log.read_bytes().count(b"Accepted publickey") == before + 1 + len(jump.split(","))
