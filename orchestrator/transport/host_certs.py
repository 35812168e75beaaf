"""Host certificates checked as OpenSSH checks them against `@cert-authority` lines of known_hosts.

paramiko reads a certificate host key but judges nothing in it, and it negotiates a host's plain key before its
certificate. So for a host that known_hosts knows only through a CA, the connection asks for certificates first
(`CertFirstTransport`), and the certificate the host offers is checked here: a host certificate, signed by a
trusted CA that no `@revoked` line takes back, naming this host among its principals, valid now, with no critical
option (none is defined for host certificates). The signature over the certificate is verified with the CA's key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import paramiko

from orchestrator.transport.known_hosts import KnownHosts, KnownLine

HOST_CERT = 2
"""SSH2_CERT_TYPE_HOST."""
_CERT_SUFFIX = "-cert-v01@openssh.com"
# How many key fields come between the nonce and the serial, by certificate type (PROTOCOL.certkeys).
_KEY_FIELDS = {"ssh-ed25519": ("string",), "ecdsa-sha2-nistp256": ("string", "string"),
               "ecdsa-sha2-nistp384": ("string", "string"), "ecdsa-sha2-nistp521": ("string", "string"),
               "ssh-rsa": ("mpint", "mpint")}  # fmt: skip


class CertFirstTransport(paramiko.Transport):
    """A paramiko Transport that asks for a host certificate before a plain host key."""

    @property
    def preferred_keys(self) -> tuple[str, ...]:
        keys = tuple(super().preferred_keys)
        return tuple(k for k in keys if k.endswith(_CERT_SUFFIX)) + tuple(
            k for k in keys if not k.endswith(_CERT_SUFFIX)
        )


@dataclass(frozen=True)
class Certificate:
    """The fields of an OpenSSH certificate that decide whether a host may present it."""

    cert_type: int
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical_options: bytes
    signature_key: bytes
    signature: bytes
    signed: bytes
    """The certificate up to its signature: what the CA signed."""


def parse_certificate(blob: bytes) -> Certificate:
    """Read an OpenSSH certificate blob (paramiko's `PublicBlob.key_blob` with its type); ValueError if malformed."""
    msg = paramiko.Message(blob)
    try:
        kind = msg.get_text()
        plain = kind.removesuffix(_CERT_SUFFIX)
        if plain == kind or plain not in _KEY_FIELDS:
            raise ValueError(f"not a certificate type this tool reads: {kind}")
        msg.get_string()  # nonce
        for field in _KEY_FIELDS[plain]:
            msg.get_mpint() if field == "mpint" else msg.get_string()
        msg.get_int64()  # serial
        cert_type = msg.get_int()
        key_id = msg.get_text()
        packed = paramiko.Message(msg.get_string())
        principals = []
        while packed.get_remainder():
            principals.append(packed.get_text())
        valid_after, valid_before = msg.get_int64(), msg.get_int64()
        critical = msg.get_string()
        msg.get_string()  # extensions
        msg.get_string()  # reserved
        signature_key = msg.get_string()
        signed = blob[: msg.packet.tell()]
        signature = msg.get_string()
    except (paramiko.SSHException, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed certificate: {exc}") from exc
    return Certificate(cert_type, key_id, tuple(principals), valid_after, valid_before, critical, signature_key,
                       signature, signed)  # fmt: skip


def is_certificate(key: paramiko.PKey) -> bool:
    """Whether the host presented a certificate (paramiko keeps it as the key's public blob)."""
    blob: Any = getattr(key, "public_blob", None)
    return blob is not None and str(blob.key_type).endswith(_CERT_SUFFIX)


def check_host_certificate(
    key: paramiko.PKey, hostname: str, known: KnownHosts, now: float | None = None
) -> str | KnownLine:
    """The `@cert-authority` line whose CA vouches for `key` as `hostname`'s, or why none does (a sentence)."""
    blob: Any = key.public_blob
    try:
        cert = parse_certificate(bytes(blob.key_blob))
    except ValueError as exc:
        return str(exc)
    if cert.cert_type != HOST_CERT:
        return "it is a user certificate, not a host certificate"
    if hostname not in cert.principals:
        return f"it is not valid for {hostname} (its principals: {', '.join(cert.principals) or 'none'})"
    moment = int(time.time() if now is None else now)
    if not cert.valid_after <= moment < cert.valid_before:
        return f"it is not valid now (valid from {_when(cert.valid_after)} to {_when(cert.valid_before)})"
    if cert.critical_options:
        return "it carries critical options, which no host certificate may"
    ca = next((line for line in known.authorities if line.key.asbytes() == cert.signature_key), None)
    if ca is None:
        return "its CA is not trusted for this host by any @cert-authority line"
    revoked = known.revoked_line(ca.key)
    if revoked is not None:
        return f"its CA is revoked ({revoked.where} marks the key of {ca.where} @revoked)"
    if not ca.key.verify_ssh_sig(cert.signed, paramiko.Message(cert.signature)):
        return f"its signature does not verify with the CA key of {ca.where}"
    return ca


def _when(stamp: int) -> str:
    if stamp >= 2**63:
        return "forever"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))
