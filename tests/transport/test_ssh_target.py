"""The in-process resolver against `ssh -G` on 20 generated config files with Include, Match and tokens."""

from __future__ import annotations

import getpass
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.transport.ssh_target import SshTarget, resolve

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")
ALIASES = ("gpu-a", "gpu-b", "box1")


def _block(rng: random.Random, tmp: Path, n: int) -> str:
    lines = [f"  HostName {rng.choice(['%h.example', 'n%h.lan', f'10.0.0.{rng.randint(1, 9)}'])}"]
    if rng.random() < 0.7:
        lines.append(f"  Port {rng.randint(1025, 9000)}")
    if rng.random() < 0.7:
        lines.append(f"  User {rng.choice(['alice', 'bob', 'ci'])}")
    for _ in range(rng.randint(0, 2)):
        lines.append(f"  IdentityFile {tmp}/keys/id_{rng.choice(['%h', '%r', 'k' + str(n)])}")
    if rng.random() < 0.5:
        lines.append(f"  ProxyJump {rng.choice(['jump', 'bastion,jump', 'me@j2:2222'])}")
    return "\n".join(lines) + "\n"


def _config(rng: random.Random, tmp: Path) -> Path:
    inc = tmp / "inc"
    inc.mkdir()
    for i in range(rng.randint(1, 3)):
        (inc / f"{i}.conf").write_text(f"Host {rng.choice(ALIASES)} gpu-*\n{_block(rng, tmp, i)}")
    parts = []
    for n in range(rng.randint(1, 3)):
        header = rng.choice([f"Host {rng.choice(ALIASES)}", "Host gpu-*", f"Match host {rng.choice(ALIASES)}"])
        parts.append(f"{header}\n{_block(rng, tmp, n + 10)}")
    parts.insert(0, f"Include {inc}/*.conf\n")  # top level: inside a block, OpenSSH makes it conditional
    parts.append(f"Host *\n{_block(rng, tmp, 99)}")
    config = tmp / "config"
    config.write_text("".join(parts))
    return config


def _ssh_g(config: Path, alias: str) -> dict[str, list[str]]:
    out = subprocess.run(["ssh", "-G", "-F", str(config), alias], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key, []).append(value)
    return found


def _tokens(path: str, want: dict[str, list[str]], alias: str) -> str:
    """`ssh -G` prints IdentityFile before expanding %h %r %p %n %u; ssh expands them when it connects."""
    values = {"h": want["hostname"][0], "r": want["user"][0], "p": want["port"][0], "n": alias,
              "u": getpass.getuser(), "%": "%"}  # fmt: skip
    return os.path.expanduser(re.sub(r"%(.)", lambda m: values.get(m[1], m[0]), path))


def test_resolver_matches_ssh_g_on_20_generated_configs(tmp_path: Path) -> None:
    mismatches = []
    for seed in range(20):
        tmp = tmp_path / str(seed)
        tmp.mkdir()
        rng = random.Random(seed)
        config = _config(rng, tmp)
        for alias in ALIASES:
            want = _ssh_g(config, alias)
            got = resolve(SshTarget(alias, ssh_config_path=str(config)))
            ours = {"hostname": got.hostname, "port": str(got.port), "user": got.user,
                    "proxyjump": ",".join(got.proxy_jump) or None,
                    "identityfile": [os.path.expanduser(k) for k in got.key_files]}  # fmt: skip
            theirs = {"hostname": want["hostname"][0], "port": want["port"][0], "user": want["user"][0],
                      "proxyjump": want.get("proxyjump", [None])[0],
                      "identityfile": [_tokens(k, want, alias) for k in want.get("identityfile", [])]}  # fmt: skip
            if not ours["identityfile"]:
                theirs["identityfile"] = []  # no IdentityFile configured: ssh -G lists its defaults
            if ours != theirs:
                mismatches.append((seed, alias, ours, theirs))
    assert not mismatches, f"{len(mismatches)} of {20 * len(ALIASES)} differ: {mismatches[:3]}"
