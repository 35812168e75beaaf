"""A throwaway OpenSSH server on 127.0.0.1 for the tests (the measured recipe in shared/reference/testhost.md).

Its own temp dir holds an ed25519 host key, a client key, known_hosts and sshd_config; nothing
under /etc is read or touched. Processes are stopped by the pids we started or collected
(the listener, and the per-connection sshd processes found by PPID), never by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.transport import SshTarget
from tests import procs

SSHD = "/usr/sbin/sshd"
LOGIN_USER = "orchtest"
LOGIN_HOME = "/tmp/orchtest-home"

SSHD_CONFIG = """Port {port}
ListenAddress {listen}
HostKey {dir}/host_ed25519
{hostcert}PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding yes
{subsystem}LogLevel INFO
{setenv}"""


def missing_tools() -> list[str]:
    """The OpenSSH programs the harness needs that this machine lacks."""
    missing = [] if os.access(SSHD, os.X_OK) else [SSHD]
    return missing + [tool for tool in ("ssh-keygen",) if shutil.which(tool) is None]


def login_user() -> str:
    """The user the tests log in as: `orchtest` when root (created once), else the current user.

    orchtest is uid 0 so it can run the project's venv under /root/.pyenv, and its shell is
    /bin/sh so no ~/.bashrc (root's runs `pyenv init`: 90-330 ms per command) slows every command.
    """
    if os.geteuid() != 0:
        return getpass.getuser()
    if not _user_exists(LOGIN_USER):
        cmd = ["useradd", "-o", "-u", "0", "-g", "0", "-M", "-d", LOGIN_HOME, "-s", "/bin/sh", LOGIN_USER]
        made = subprocess.run(cmd, capture_output=True, text=True)
        if made.returncode not in (0, 9):  # 9: created meanwhile by another test process
            raise RuntimeError(f"useradd {LOGIN_USER} failed: {made.stderr.strip()}")
        # useradd locks the account ('!'), which sshd refuses with UsePAM no; '*' is "no password".
        subprocess.run(["usermod", "-p", "*", LOGIN_USER], check=True)
    # sshd prints "Could not chdir to home directory" on every command's stderr without it.
    os.makedirs(LOGIN_HOME, mode=0o700, exist_ok=True)
    return LOGIN_USER


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[1] == pid and st[0] != "Z":
                kids.append(int(entry))
    return kids


def _is_sshd(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("sshd")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class SshdHost:
    """One sshd listening on 127.0.0.1, with its keys and config in a temp dir of its own."""

    def __init__(
        self, user: str, *, listen: str = "127.0.0.1", netns: str | None = None, sftp: bool = True,
        host_ca: bool = False,
    ) -> None:  # fmt: skip
        self.user = user
        self.sftp = sftp
        """False: no `Subsystem sftp` line, as on hardened hosts (file transfer must go through the shell)."""
        self.host_ca = host_ca
        """True: the host key is also offered as a certificate signed by `ca_key` (`sign_host_key` re-signs it)."""
        self.listen = listen
        self.netns = netns
        """A network namespace of the test's own to run in (then it listens on port 22 of `listen` there)."""
        self.dir = Path(tempfile.mkdtemp(prefix="orch-sshd-"))
        self.port = 0
        self.client_key = self.dir / "client_ed25519"
        self.host_key = self.dir / "host_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.log = self.dir / "sshd.log"
        self.ca_key = self.dir / "host_ca"
        self._proc: subprocess.Popen[bytes] | None = None

    def target(self, **overrides: Any) -> SshTarget:
        """An SshTarget for this server (its own known_hosts and key; no ~/.ssh/config), fields overridable."""
        target = SshTarget(
            self.listen, port=self.port, user=self.user, key_filename=str(self.client_key),
            known_hosts=str(self.known_hosts), ssh_config_path=None, connect_timeout=5.0,
        )  # fmt: skip
        return dataclasses.replace(target, **overrides)

    def host_key_line(self) -> str:
        """This server's known_hosts line."""
        kind, b64 = (self.dir / "host_ed25519.pub").read_text().split()[:2]
        name = self.listen if self.port == 22 else f"[{self.listen}]:{self.port}"
        return f"{name} {kind} {b64}\n"

    def start(self, timeout: float = 5.0) -> SshdHost:
        """Generate keys (first time), write the config and start sshd; return when it listens."""
        if not self.host_key.exists():
            self._keygen(self.host_key, "orch-testhost")
            self._keygen(self.client_key, "orch-client")
            authorized = self.dir / "authorized_keys"
            authorized.write_text((self.dir / "client_ed25519.pub").read_text())
            authorized.chmod(0o600)
        if self.host_ca and not self.ca_key.exists():
            self._keygen(self.ca_key, "orch-host-ca")
            self.sign_host_key([self.listen])
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir, compiled in
        for _ in range(5):  # another process may take the free port before sshd binds it
            self.port = self.port or (22 if self.netns else _free_port())
            if self._launch(timeout):
                self.known_hosts.write_text(self.host_key_line())
                return self
            self.port = 0
        raise RuntimeError(f"sshd did not start: {self.log.read_text()}")

    def ca_line(self, patterns: str | None = None) -> str:
        """The known_hosts line that trusts this server's host CA (for `patterns`, default `[listen]:*`)."""
        kind, b64 = (self.dir / "host_ca.pub").read_text().split()[:2]
        return f"@cert-authority {patterns or f'[{self.listen}]:*'} {kind} {b64}\n"

    def sign_host_key(self, principals: list[str], validity: str = "-5m:+1h", ca: Path | None = None) -> None:
        """(Re-)sign the host key into host_ed25519-cert.pub (by `ca`, default the host CA); restart to offer it."""
        subprocess.run(
            ["ssh-keygen", "-q", "-s", str(ca or self.ca_key), "-I", "orch-testhost", "-h", "-n", ",".join(principals),
             "-V", validity, str(self.dir / "host_ed25519.pub")],
            check=True, capture_output=True,
        )  # fmt: skip

    def _launch(self, timeout: float) -> bool:
        config = self.dir / "sshd_config"
        # Sessions carry the test run's mark, so servers launched over SSH are ended with the run (tests/procs.py).
        mark = procs.current_mark()
        setenv = f"SetEnv {procs.MARK_ENV}={mark}\n" if mark else ""
        config.write_text(
            SSHD_CONFIG.format(
                port=self.port,
                listen=self.listen,
                dir=self.dir,
                user=self.user,
                setenv=setenv,
                subsystem="Subsystem sftp internal-sftp\n" if self.sftp else "",
                hostcert=f"HostCertificate {self.dir}/host_ed25519-cert.pub\n" if self.host_ca else "",
            )
        )
        start = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            command = [SSHD, "-D", "-e", "-f", str(config)]
            if self.netns:  # `ip netns exec` execs sshd: the pid stays the listener's
                command = ["ip", "netns", "exec", self.netns, *command]
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        procs.register(self._proc.pid, "sshd")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_bytes()[start:]
            if b"Server listening" in text:
                return True
            if self._proc.poll() is not None:
                if b"Address already in use" in text:
                    return False
                raise RuntimeError(f"sshd exited {self._proc.returncode}: {text.decode(errors='replace')}")
            time.sleep(0.005)
        self.stop()
        raise TimeoutError(f"sshd not listening after {timeout}s: {self.log.read_text()}")

    def connection_pids(self) -> list[int]:
        """The sshd processes serving connections: the listener's children and their sshd children."""
        if self._proc is None:
            return []
        monitors = _children(self._proc.pid)
        return monitors + [kid for m in monitors for kid in _children(m) if _is_sshd(kid)]

    def kill_connections(self, timeout: float = 5.0) -> list[int]:
        """SIGKILL every per-connection sshd (a dropped connection, as clients see it); return their pids."""
        pids = self.connection_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(_alive(p) for p in pids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"sshd connection processes {pids} still alive")
            time.sleep(0.005)
        return pids

    def accepted_logins(self) -> int:
        """How many logins this server has accepted so far (each is one new connection)."""
        return self.log.read_bytes().count(b"Accepted publickey") if self.log.exists() else 0

    def stop(self) -> None:
        """Stop the listener and its connections (they outlive the listener otherwise)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        kids = self.connection_pids()
        self._proc.terminate()
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def restart(self) -> SshdHost:
        """Stop and start again on the same port with the same keys."""
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        """Stop and remove the temp dir."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _keygen(path: Path, comment: str) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)


@contextlib.contextmanager
def ssh_agent_holding(key: Path, sock: Path) -> Iterator[str]:
    """An ssh-agent of our own (ended by its pid) listening on `sock` and holding `key`; yields the socket path."""
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        yield str(sock)
    finally:
        proc.terminate()
        proc.wait(5)
