"""A host known only through `@cert-authority`: its certificate is asked for and checked as OpenSSH checks it, on a
real loopback sshd offering a host certificate (issue 33 broken 6: "a CA line is understood")."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import HostKeyRejected
from orchestrator.transport import open_transport
from tests.sshd_host import SshdHost, login_user

pytestmark = pytest.mark.ssh


@pytest.fixture
def ca_host(sshd: SshdHost) -> Iterator[SshdHost]:
    """An sshd of this test whose host key is also offered as a certificate signed by its own CA."""
    host = SshdHost(login_user(), host_ca=True).start()
    yield host
    host.cleanup()


def _run(host: SshdHost, known: Path, **overrides: object) -> str:
    with open_transport(host.target(known_hosts=str(known), **overrides)) as t:
        return t.run("echo in").text


def _openssh_accepts(host: SshdHost, known: Path) -> bool:
    done = subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", str(host.client_key), "-p", str(host.port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
         f"{host.user}@127.0.0.1", "true"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return done.returncode == 0


def test_a_certificate_signed_by_a_trusted_ca_is_accepted_and_nothing_is_added(
    ca_host: SshdHost, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("# team CA\n" + ca_host.ca_line())
    assert _openssh_accepts(ca_host, known)  # the reference
    assert _run(ca_host, known) == "in\n"
    assert _run(ca_host, known, accept_new_host_keys=True) == "in\n"
    assert known.read_text() == "# team CA\n" + ca_host.ca_line()  # a certificate is trusted through its CA


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("other principal", "it is not valid for 127.0.0.1 (its principals: gpu-box.example)"),
        ("expired", "it is not valid now (valid from 2020-01-01"),
        ("other CA", "its CA is not trusted for this host by any @cert-authority line"),
        ("revoked CA", "its CA is revoked"),
    ],
)
def test_a_certificate_no_trusted_ca_vouches_for_is_refused_saying_why(
    ca_host: SshdHost, tmp_path: Path, case: str, reason: str
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(ca_host.ca_line())
    if case == "other principal":
        ca_host.sign_host_key(["gpu-box.example"])
    elif case == "expired":
        ca_host.sign_host_key(["127.0.0.1"], validity="20200101:20200102")
    elif case == "other CA":
        other = tmp_path / "other_ca"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
        ca_host.sign_host_key(["127.0.0.1"], ca=other)
    else:
        known.write_text(ca_host.ca_line() + "@revoked * " + " ".join(ca_host.ca_line().split()[2:4]) + "\n")
    ca_host.restart()
    logins = ca_host.accepted_logins()
    with pytest.raises(HostKeyRejected) as caught:
        _run(ca_host, known, accept_new_host_keys=True)
    message = str(caught.value)
    assert "host certificate for" in message and reason in message, message
    assert not _openssh_accepts(ca_host, known)  # OpenSSH refuses it too
    assert ca_host.accepted_logins() == logins
