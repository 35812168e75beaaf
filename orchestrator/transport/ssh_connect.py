"""The Fabric connection for an SSH target, configured from our own reading of ~/.ssh/config."""

from __future__ import annotations

from typing import Any

from fabric import Config, Connection

from orchestrator.transport.host_certs import CertFirstTransport
from orchestrator.transport.hostkeys import apply_host_key_policy
from orchestrator.transport.ssh_target import ResolvedTarget


def new_connection(t: ResolvedTarget) -> Any:
    """A not yet opened fabric.Connection (untyped) to `t`, with its keys and host key policy."""
    # We resolve ~/.ssh/config ourselves (ssh_target.py); in_stream=False keeps Fabric off our stdin.
    config = Config(overrides={"load_ssh_configs": False, "run": {"in_stream": False}})
    conn = Connection(
        t.hostname, user=t.user, port=t.port, config=config, connect_timeout=t.connect_timeout,
        connect_kwargs={
            "key_filename": list(t.key_files),
            # With no key file: the agent (SSH_AUTH_SOCK), then ~/.ssh/id_*; IdentitiesOnly allows neither.
            "look_for_keys": not t.key_files and not t.identities_only,
            "allow_agent": not t.identities_only,
            "banner_timeout": t.connect_timeout,
            "auth_timeout": t.connect_timeout,
        },
    )  # fmt: skip
    if apply_host_key_policy(conn.client, t):
        conn.connect_kwargs["transport_factory"] = CertFirstTransport  # known only through its CA
    return conn
