"""Errors about hosts read like errors about matrices (issue 35 item 2, issue 33 weak): a refused port, a missing key
file, a port that never says SSH, a name that does not resolve and a hosts.yaml value no host name can hold each
name the hosts.yaml file and line, what was tried, what came back and the fix, through the CLI, with no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.simhost import orchestrator, write_hosts
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh

FLAGS = ["--", "--model-path", "/models/tiny"]


def _run(hosts: Path, tmp_path: Path) -> str:
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), *FLAGS, db=tmp_path / "o.db", timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return " ".join(result.stderr.split())


def _origin(hosts: Path) -> str:
    line = next(number for number, text in enumerate(hosts.read_text().splitlines(), 1) if "ssh:" in text)
    return f"[configured at {hosts}:{line} (host 'simhost')]"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_connection_refused(sshd: SshdHost, tmp_path: Path, closed_port: int) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "w", sshd=sshd, ssh=f"{sshd.user}@127.0.0.1:{closed_port}")
    message = _run(hosts, tmp_path)
    assert f"connection refused by 127.0.0.1 port {closed_port} (nothing listens there)" in message, message
    assert _origin(hosts) in message and "fix: start sshd on the host" in message, message
    assert "ConnectionRefusedError" not in message and "Errno" not in message


def test_missing_key_file(sshd: SshdHost, tmp_path: Path) -> None:
    missing = tmp_path / "keys" / "id_ed25519"
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "w", sshd=sshd, identity_file=str(missing))
    message = _run(hosts, tmp_path)
    assert f"the key file {missing} does not exist" in message and _origin(hosts) in message, message
    assert "fix: point identity_file in hosts.yaml" in message and "FileNotFoundError" not in message


def test_banner_timeout(sshd: SshdHost, tmp_path: Path, silent_port: int) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ConnectTimeout 1\n")
    hosts = write_hosts(
        tmp_path / "hosts.yaml", tmp_path / "w", sshd=sshd, ssh=f"{sshd.user}@127.0.0.1:{silent_port}",
        ssh_config=str(config),
    )  # fmt: skip
    message = _run(hosts, tmp_path)
    assert f"127.0.0.1 port {silent_port} accepted the connection but sent no SSH banner within 1 s" in message, message
    assert _origin(hosts) in message and "is an sshd (not another service)" in message
    assert "No existing session" not in message


def test_a_surrogate_in_hosts_yaml_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text('simhost:\n  ssh: "me@127.0.0.1:1"\n  workdir: "/w/\\ud83d\\ude00"\n')
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: m\nflags: {model-path: /m}\nmatrix:\n  tp-size: [1]\n")
    for command in (["validate", str(matrix)], ["run"]):
        done = orchestrator(*command, "--host", "simhost", "--hosts", str(hosts), db=tmp_path / "o.db", timeout=60)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{hosts}:3: simhost.workdir contains \\ud83d, half of a UTF-16 surrogate pair" in done.stderr


def test_unknown_host_name_in_a_network_namespace_of_our_own(tmp_path: Path) -> None:
    """Resolved where no packet can leave (an empty namespace, lo down): the resolver answers at once, nothing else."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ns = f"orchdns{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        hosts = tmp_path / "hosts.yaml"
        hosts.write_text("simhost:\n  ssh: me@gpu-box-that-does-not-exist.invalid:22\n  workdir: /tmp/w\n")
        done = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "orchestrator", "run", "--host", "simhost", "--hosts",
             str(hosts), "--db", str(tmp_path / "o.db"), *FLAGS],
            capture_output=True, text=True, timeout=60, cwd=REPO,
        )  # fmt: skip
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    message = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in message, message
    assert "cannot resolve the host name 'gpu-box-that-does-not-exist.invalid'" in message, message
    assert f"[configured at {hosts}:2 (host 'simhost')]" in message and "getent hosts" in message
    assert "gaierror" not in message
