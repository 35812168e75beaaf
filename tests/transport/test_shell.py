"""Pure parts of the transport seam: quoting and masking, secret encoding, error mapping, target resolution."""

from __future__ import annotations

import base64
import getpass
import socket
import subprocess
import sys
from pathlib import Path
from typing import Literal

import paramiko
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import CommandTimeout, ConnectFailed, ConnectionLost, HostKeyRejected, TransportError
from orchestrator.transport import (
    LocalTransport,
    Raw,
    ShellCommand,
    map_transport_errors,
    mask_env,
    open_transport,
    quote,
)
from orchestrator.transport.launch import encode_secrets
from orchestrator.transport.shell import looks_secret
from orchestrator.transport.ssh_target import SshTarget, resolve


def test_values_are_quoted_and_raw_parts_are_not() -> None:
    cmd = ShellCommand("echo", "a b", "$(x)", 3, Path("/p q"), Raw("|"), "cat")
    assert cmd.raw() == str(cmd) == "echo 'a b' '$(x)' 3 '/p q' | cat"
    assert ShellCommand(cmd, Raw("&&"), "true") == ShellCommand(Raw("echo 'a b' '$(x)' 3 '/p q' | cat && true"))


def test_an_assignment_is_one_quoted_word() -> None:
    cmd = ShellCommand.assign("MODEL", "a b") + ShellCommand("serve", "--port", 30000)
    assert str(cmd) == cmd.raw() == "MODEL='a b' serve --port 30000"


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError):
        quote("a\0b")
    with pytest.raises(ValueError):
        ShellCommand.assign("A-B", "x")
    with pytest.raises(ValueError):
        encode_secrets({"X; rm": "v"})
    with pytest.raises(ValueError):
        encode_secrets({"X": "nul\0"})


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True), ("OPENAI_API_KEY", True), ("aws_secret_access_key", True), ("DB_PASSWORD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True), ("CUDA_VISIBLE_DEVICES", False), ("PATH", False),
        ("SGLANG_PORT", False),
    ],
)  # fmt: skip
def test_looks_secret(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_mask_env() -> None:
    env = {"HF_TOKEN": "a", "MY_VAR": "b", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert mask_env(env, ["MY_VAR"]) == {"HF_TOKEN": "***", "MY_VAR": "***", "CUDA_VISIBLE_DEVICES": "0,1"}


def test_secrets_are_encoded_one_base64_line_each_then_a_blank_line() -> None:
    assert encode_secrets({}) == b"\n"
    encoded = encode_secrets({"A_TOKEN": "x\ny", "B": ""})
    assert encoded == b"A_TOKEN=" + base64.b64encode(b"x\ny") + b"\nB=\n\n"


SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
"""Unicode surrogates: no UTF-8 encoding, so no shell argument can carry one."""


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=SURROGATES, blacklist_characters="\0"), max_size=40))
def test_any_text_survives_quoting_through_sh(text: str) -> None:
    out = LocalTransport().run(ShellCommand("printf", "%s", text).raw()).stdout
    assert out == text.encode()


@pytest.mark.parametrize(
    ("raised", "connecting", "expected"),
    [
        (TimeoutError("t"), True, ConnectFailed),
        (TimeoutError("t"), False, CommandTimeout),
        (ConnectionRefusedError(111, "refused"), True, ConnectFailed),
        (ConnectionResetError(104, "reset"), False, ConnectionLost),
        (EOFError(), False, ConnectionLost),
        (socket.gaierror(-2, "Name or service not known"), True, ConnectFailed),
        (PermissionError(13, "denied"), False, TransportError),
        (OSError("Socket is closed"), False, ConnectionLost),
        (subprocess.TimeoutExpired("x", 1), False, CommandTimeout),
        (paramiko.AuthenticationException("no"), True, ConnectFailed),
        (paramiko.SSHException("Server '[h]:22' not found in known_hosts"), True, HostKeyRejected),
        (paramiko.SSHException("SSH session not active"), False, ConnectionLost),
    ],
)
def test_foreign_errors_become_the_most_specific_transport_error(
    raised: Exception, connecting: bool, expected: type[TransportError]
) -> None:
    with pytest.raises(TransportError) as caught, map_transport_errors("op", connecting=connecting):
        raise raised
    assert type(caught.value) is expected and caught.value.__cause__ is raised


def test_programming_errors_are_not_translated() -> None:
    with pytest.raises(KeyError), map_transport_errors("op"):
        raise KeyError("k")


def test_target_resolution_config_then_explicit_fields(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host gpu1\n  HostName 10.0.0.5\n  Port 2200\n  User ubuntu\n  IdentityFile ~/.ssh/gpu\n"
        "  UserKnownHostsFile /k/a /k/b\n"
    )
    r = resolve(SshTarget("gpu1", ssh_config_path=str(config)))
    assert (r.hostname, r.port, r.user, r.known_hosts) == ("10.0.0.5", 2200, "ubuntu", "/k/a")
    assert r.key_files == (str(Path("~/.ssh/gpu").expanduser()),) and r.known_hosts_name == "[10.0.0.5]:2200"
    r = resolve(SshTarget("gpu1", port=22, user="me", key_filename="/k", ssh_config_path=str(config)))
    assert (r.port, r.user, r.key_files, r.known_hosts_name) == (22, "me", ("/k",), "10.0.0.5")
    r = resolve(SshTarget("plain", ssh_config_path=None))
    assert (r.hostname, r.port, r.user, r.describe()) == ("plain", 22, getpass.getuser(), f"ssh {r.user}@plain:22")


def test_open_transport_picks_by_spec_and_loads_paramiko_only_for_ssh() -> None:
    code = (
        "import sys; from orchestrator.transport import SshTarget, open_transport; "
        "t = open_transport('local'); assert t.describe() == 'local'; assert 'paramiko' not in sys.modules; "
        "s = open_transport(SshTarget('h', ssh_config_path=None)); assert 'paramiko' in sys.modules; "
        "print(type(s).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "SshTransport\n"
    with pytest.raises(ValueError):
        open_transport("gpu1")  # type: ignore[arg-type]
