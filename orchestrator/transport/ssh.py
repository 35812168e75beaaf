"""SshTransport: the transport contract over one reused SSH connection.

Fabric holds the connection; commands go through raw paramiko channels, not Fabric's runner, so
output stays bytes and nothing waits on Fabric's 10 ms input polling (testhost.md §3).
A dropped connection is reopened under a declared tenacity policy; idempotent operations are
then repeated, and a launch is first looked up on the host (its pid file) so that nothing is
started twice.
"""

from __future__ import annotations

import logging
import posixpath
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, TypeVar

import paramiko
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from orchestrator.errors import (
    CommandTimeout,
    ConnectFailed,
    ConnectionLost,
    HostKeyRejected,
    TransportError,
)
from orchestrator.transport.base import CommandResult, Transport, check_byte_range, map_transport_errors
from orchestrator.transport.breaker import HostBreaker
from orchestrator.transport.hostkeys import refused_key_error
from orchestrator.transport.launch import EXIT_PID_FILE_EXISTS, LAUNCH_TIMEOUT_S, LaunchRequest, recover_pid
from orchestrator.transport.shell import ShellCommand
from orchestrator.transport.ssh_channel import collect
from orchestrator.transport.ssh_connect import new_connection
from orchestrator.transport.ssh_errors import connect_error
from orchestrator.transport.ssh_files import (
    read_command,
    read_result,
    sftp_read,
    sftp_write,
    size_command,
    size_result,
    write_command,
)
from orchestrator.transport.ssh_keys import auth_refused
from orchestrator.transport.ssh_target import SshTarget, jump_target, resolve

# Reconnect policy: read at call time, so tests may shorten it by patching these names.
# Bounded attempts with a short backoff: 0.25, 0.5, 1, 2, 2 s between them rides out an sshd restart
# (a few seconds) yet gives a dead host up within about 6 s; the host's breaker then fails the rest at once.
RETRY_ATTEMPTS = 6
RETRY_STOP = stop_after_attempt(RETRY_ATTEMPTS)
RETRY_WAIT = wait_exponential(multiplier=0.25, max=2.0)

IO_TIMEOUT_S = 30.0
KEEPALIVE_S = 15  # a silent peer is noticed, and idle NAT/firewall state kept alive
REMOTE_TIMEOUT_MARGIN_S = 0.5  # the host's own timeout fires this long after ours, so ours is what callers see
REMOTE_KILL_GRACE_S = 2  # then SIGKILL if SIGTERM was not enough
CHANNEL_RETRY_S = 0.05

T = TypeVar("T")
log = logging.getLogger(__name__)
_SFTP_ABSENT_SAID: set[str] = set()
"""Hosts already reported as having no SFTP subsystem: said once per process, not once per connection."""

# Paramiko logs every dropped socket at ERROR; we report the failure ourselves, once, translated.
_paramiko_log = logging.getLogger("paramiko.transport")
if _paramiko_log.level == logging.NOTSET:
    _paramiko_log.setLevel(logging.CRITICAL)


class _NotSent(ConnectionLost):
    """The channel could not even be opened, so the command never reached the host."""


class SshTransport(Transport):
    """One host over SSH; the connection is opened on first use and reused until closed."""

    def __init__(
        self, target: SshTarget, *, sleep: Callable[[float], None] = time.sleep, breaker: HostBreaker | None = None
    ) -> None:
        self.target = resolve(target)
        self._sleep = sleep
        self._breaker = breaker
        """Shared by every connection of a sweep to this host: one that gives up declares the host down."""
        self._conn: Any = None  # fabric.Connection (untyped)
        self._sftp_client: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        self._sftp_lock = threading.Lock()
        """One SFTP request at a time: the workers of a sweep share the connection, and paramiko's SFTP client
        would mix up the replies of requests sent at once from several threads."""
        self._connected_once = False
        self._epoch = 0
        self._jump: SshTransport | None = None  # the bastion of a ProxyJump
        self._no_sftp = False
        """The host refused the SFTP subsystem: files go through shell commands on the exec channel instead."""

    def describe(self) -> str:
        """`ssh user@host:port` (with the alias, if one was used)."""
        return self.target.describe()

    @property
    def connection_epoch(self) -> int:
        """How many SSH connections were opened so far (each reconnect after a drop adds one)."""
        return self._epoch

    def run(
        self, command: str, timeout: float = 30.0, stdin: bytes | None = None, *, idempotent: bool = True
    ) -> CommandResult:
        """Run `command` with `sh -c` on the host; the host kills it soon after a CommandTimeout."""
        return self._retrying(lambda: self._exec(command, timeout, stdin), resend=idempotent)

    def start_detached(
        self,
        command: str,
        log_path: str,
        pid_path: str,
        cwd: str | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> int:
        """Start `command` detached (see Transport.start_detached); a lost reply is recovered from the pid file."""
        request = LaunchRequest.build(command, log_path, pid_path, cwd, secrets)
        pid_file = posixpath.join(cwd, pid_path) if cwd else pid_path
        tries = 0

        def attempt() -> int:
            nonlocal tries
            tries += 1
            if tries > 1:  # an earlier try may have launched and lost only its reply
                pid = self._recover_launch(pid_file)
                if pid is not None:
                    return pid
            result = self._exec(request.command, LAUNCH_TIMEOUT_S, request.stdin)
            if result.exit_code == EXIT_PID_FILE_EXISTS and tries > 1:
                # The earlier try's launcher claimed the pid file after we looked: it is that launch.
                return self._recover_launch(pid_file) or request.parse(result)
            return request.parse(result)

        return self._retrying(attempt)

    def read_range(self, path: str, offset: int, length: int | None = None) -> bytes:
        """Raw bytes of `path` from `offset` (over SFTP, else by command); b"" if the file does not exist."""
        check_byte_range(offset, length)
        return self._retrying(lambda: self._read(path, offset, length) or b"")

    def file_size(self, path: str) -> int | None:
        """Size of `path`, or None if it does not exist."""

        def stat() -> int | None:
            sftp = self._sftp()
            if sftp is None:
                return size_result(self._exec(size_command(path), IO_TIMEOUT_S, None), path, self.describe())
            with self._sftp_lock, map_transport_errors(f"{self.describe()}: stat {path}"):
                try:
                    return sftp.stat(path).st_size
                except FileNotFoundError:
                    return None

        return self._retrying(stat)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write `path` atomically (temp file + rename in its directory), creating parent directories."""
        payload = data.encode() if isinstance(data, str) else data
        if self._retrying(lambda: self._sftp_write(path, payload, mode)):
            return
        # Without SFTP, or when SFTP only said "Failure": the same write as a command (which also names the cause).
        result = self.run(write_command(path, mode), timeout=IO_TIMEOUT_S, stdin=payload)
        if not result.ok:
            raise TransportError(f"{self.describe()}: cannot write {path}: {result.stderr_text.strip()}")

    def open_channel(self, host: str, port: int, timeout: float | None = None) -> paramiko.Channel:
        """A direct-tcpip channel to `host:port` as the host resolves it (for tunnel.TunnelTransport).

        Raises paramiko.ChannelException when nothing listens there; the tunnel maps that itself.
        """
        if self._breaker is not None and self._breaker.refusing:
            raise self._breaker.refuse(f"{self.describe()}: open a channel to {host}:{port}")
        transport: paramiko.Transport = self._connection().transport
        return transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout)

    def close(self) -> None:
        """Close the connection (and the bastion's); the next operation opens a new one."""
        self._disconnect()
        jump, self._jump = self._jump, None
        if jump is not None:
            jump.close()

    # -- one attempt of each operation ---------------------------------------------------------

    def _exec(self, command: str, timeout: float, stdin: bytes | None) -> CommandResult:
        conn = self._connection()
        deadline = time.monotonic() + timeout
        with map_transport_errors(f"{self.describe()}: run {command[:80]!r}"):
            chan = self._open_session(conn, deadline)
            try:
                # The host enforces the timeout too, so a command we gave up on does not run on.
                limit = f"{timeout + REMOTE_TIMEOUT_MARGIN_S:.3f}"
                wrapped = ShellCommand("exec", "timeout", "-k", REMOTE_KILL_GRACE_S, limit, "sh", "-c", command)
                chan.exec_command(wrapped.raw())
                chan.settimeout(max(deadline - time.monotonic(), 0.001))
                if stdin:
                    chan.sendall(stdin)
                chan.shutdown_write()
                dropped = f"{self.describe()}: connection dropped while running {command[:80]!r}"
                return collect(chan, deadline, lambda: self._timeout(command, timeout), dropped)
            finally:
                chan.close()

    def _open_session(self, conn: Any, deadline: float) -> paramiko.Channel:
        """A session channel for one command; refused ones are asked again, the connection is fine."""
        while True:
            try:
                channel: paramiko.Channel = conn.transport.open_session(timeout=self.target.connect_timeout)
                return channel
            except paramiko.ChannelException as exc:
                # sshd refuses sessions past its MaxSessions (10): the sweep's workers share the connection, and
                # one of theirs ends within moments.
                if time.monotonic() + CHANNEL_RETRY_S >= deadline:
                    raise _NotSent(f"{self.describe()}: cannot open a channel: {exc}") from exc
                self._sleep(CHANNEL_RETRY_S)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise _NotSent(f"{self.describe()}: cannot open a channel: {exc}") from exc

    def _timeout(self, command: str, timeout: float) -> CommandTimeout:
        return CommandTimeout(f"{self.describe()}: {command[:80]!r} still running after {timeout}s (killed)")

    def _read(self, path: str, offset: int, length: int | None) -> bytes | None:
        sftp = self._sftp()
        if sftp is None:
            return read_result(self._exec(read_command(path, offset, length), IO_TIMEOUT_S, None), path,
                               self.describe())  # fmt: skip
        with self._sftp_lock, map_transport_errors(f"{self.describe()}: read {path}"):
            return sftp_read(sftp, path, offset, length)

    def _sftp_write(self, path: str, payload: bytes, mode: int) -> bool:
        sftp = self._sftp()
        if sftp is None:
            return False
        with self._sftp_lock, map_transport_errors(f"{self.describe()}: write {path}"):
            return sftp_write(sftp, path, payload, mode)

    def _recover_launch(self, pid_path: str) -> int | None:
        """The pid of a launch whose reply was lost, or None if it never claimed its pid file."""
        return recover_pid(lambda: self._read(pid_path, 0, None), pid_path, self.describe(), self._sleep)

    # -- the connection --------------------------------------------------------------------------

    def _retrying(self, op: Callable[[], T], *, resend: bool = True) -> T:
        breaker = self._breaker
        if breaker is not None and breaker.refusing:
            raise breaker.refuse(self.describe())
        exhausted = False

        def stop(state: RetryCallState) -> bool:
            nonlocal exhausted
            exhausted = bool(RETRY_STOP(state))
            # Another connection declared the host down meanwhile: do not spend our own attempts on it.
            return exhausted or (breaker is not None and breaker.refusing)

        retrying = Retrying(
            stop=stop, wait=RETRY_WAIT, sleep=self._sleep, reraise=True,
            retry=retry_if_exception(self._may_retry if resend else self._never_sent),
            before_sleep=self._before_retry,
        )  # fmt: skip
        try:
            return retrying(op)
        except (ConnectionLost, ConnectFailed) as exc:
            if breaker is not None and exhausted and not isinstance(exc, HostKeyRejected):
                breaker.trip(f"gave up after {RETRY_ATTEMPTS} attempts: {exc}")
            raise

    def _may_retry(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionLost) or self._never_sent(exc)

    def _never_sent(self, exc: BaseException) -> bool:
        # A failed reconnect is worth retrying; a host never reached or a refused key is not.
        reconnect_failed = isinstance(exc, ConnectFailed) and not isinstance(exc, HostKeyRejected)
        reached = self._connected_once or (self._breaker is not None and self._breaker.reached)
        return isinstance(exc, _NotSent) or (reconnect_failed and reached)

    def _before_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning("%s; reconnecting (attempt %d)", exc, state.attempt_number + 1)
        self._disconnect()

    def _connection(self) -> Any:
        with self._lock:
            if self._conn is None:
                self._conn = self._new_connection()
            elif not self._conn.is_connected:
                self._disconnect()  # the old client's thread and SFTP session belong to a dead socket
            if not self._conn.is_connected:
                self._open(self._conn)
            return self._conn

    def _sftp(self) -> paramiko.SFTPClient | None:
        """The connection's SFTP session, or None on a host without the SFTP subsystem."""
        conn = self._connection()
        with self._lock:
            if self._sftp_client is None and not self._no_sftp:
                if conn is not self._conn or not conn.is_connected:
                    # Another thread dropped it between our getting it and now (its retry reconnects): ours does too.
                    raise ConnectionLost(f"{self.describe()}: the connection closed while opening SFTP")
                with map_transport_errors(f"{self.describe()}: open SFTP"):
                    try:
                        sftp = conn.client.open_sftp()
                    except (paramiko.SSHException, EOFError):
                        # A refused subsystem closes only its channel; a dropped connection takes the transport.
                        if not conn.transport.is_active():
                            raise
                        self._sftp_absent()
                        return None
                    channel = sftp.get_channel()
                    if channel is not None:
                        channel.settimeout(IO_TIMEOUT_S)
                    self._sftp_client = sftp
            return self._sftp_client

    def _sftp_absent(self) -> None:
        self._no_sftp = True
        if self.describe() not in _SFTP_ABSENT_SAID:
            _SFTP_ABSENT_SAID.add(self.describe())
            log.warning("%s: the host has no SFTP subsystem (it refused the request: no `Subsystem sftp` in its "
                        "sshd_config?); files go through shell commands instead", self.describe())  # fmt: skip

    def _new_connection(self) -> Any:
        return new_connection(self.target)

    def _open(self, conn: Any) -> None:
        t = self.target
        with map_transport_errors(f"{self.describe()}: connect", connecting=True):
            # A fresh socket per open: paramiko closes the one it was given, and Fabric's reopen
            # of a dead socket fails with EBADF (testhost.md §3).
            try:
                sock = self._socket()
            except Exception as exc:
                raise connect_error(t, exc) or exc from exc
            try:
                conn.connect_kwargs["sock"] = sock
                conn.open()
            except BaseException as exc:
                reached = conn.client.get_transport()  # whether it got past TCP (and heard a banner)
                # Paramiko leaves the transport thread running after a failed connect.
                conn.client.close()
                sock.close()
                if isinstance(exc, paramiko.BadHostKeyException):
                    raise refused_key_error(t, exc) from exc
                if isinstance(exc, paramiko.AuthenticationException):
                    raise auth_refused(t, exc) from exc
                explained = connect_error(t, exc, reached) if isinstance(exc, Exception) else None
                if explained is not None:
                    raise explained from exc
                raise
            conn.transport.set_keepalive(KEEPALIVE_S)
        self._connected_once = True
        self._epoch += 1
        if self._breaker is not None:
            self._breaker.connected()

    def _socket(self) -> socket.socket | paramiko.ProxyCommand | paramiko.Channel:
        """The connection's socket: the config's ProxyCommand, else a TCP socket with TCP_NODELAY."""
        t = self.target
        if t.proxy_jump:
            # Fabric's gateway idea: a direct-tcpip channel from the bastion is the next hop's socket.
            if self._jump is None:
                self._jump = SshTransport(jump_target(t), sleep=self._sleep)
            return self._jump.open_channel(t.hostname, t.port, timeout=t.connect_timeout)
        if t.proxy_command:
            return paramiko.ProxyCommand(t.proxy_command)
        sock = socket.create_connection((t.hostname, t.port), timeout=t.connect_timeout)
        # Paramiko never sets it; with Nagle on, each exchange waits ~40 ms for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _disconnect(self) -> None:
        with self._lock:
            sftp, self._sftp_client = self._sftp_client, None
            if self._conn is None:
                return
            # Tearing down a dead connection raises from whatever part already died; none of it matters.
            with suppress(Exception):
                if sftp is not None:
                    sftp.close()
            with suppress(Exception):
                self._conn.client.close()  # not Connection.close(): it skips this once the socket is dead
