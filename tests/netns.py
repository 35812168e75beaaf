"""Network namespaces of a test's own (as root): a bastion reachable from here, and a target reachable only from
the bastion (testhost.md §5, §7). Addresses are in subnets no route of this machine uses; nothing leaves it.

    this machine --veth 10.201.K.0/30--> bastion ns --veth 10.202.K.0/30--> target ns

The bastion's namespace does not forward, and this machine gets an `unreachable` route for the target's subnet,
so a direct connection to the target fails at once instead of going out by the default route.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass


def netns_missing() -> str | None:
    """Why namespaces cannot be made here (not root, no `ip`), or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_SYS_ADMIN"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2): scripts/_setup.sh installs it"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _free_subnets() -> int:
    """A K such that 10.201.K.0/30 and 10.202.K.0/30 are on no route of this machine."""
    routes = subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    start = os.getpid() % 250
    for k in (start + i for i in range(250)):
        k = k % 250 + 1
        if f"10.201.{k}." not in routes and f"10.202.{k}." not in routes:
            return k
    raise RuntimeError("no free 10.201.K/10.202.K subnet")


def _pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@dataclass
class BastionNets:
    """The two namespaces and their addresses; `down()` ends every process in them and removes everything."""

    bastion_ns: str
    target_ns: str
    bastion_ip: str
    target_ip: str
    blocked: str
    _made: list[str]

    @classmethod
    def up(cls) -> BastionNets:
        """Create both namespaces, the veth pairs, and the unreachable route; undone on any failure."""
        tag = f"{os.getpid() % 100000}"
        k = _free_subnets()
        nets = cls(f"orb{tag}", f"ort{tag}", f"10.201.{k}.2", f"10.202.{k}.2", f"10.202.{k}.0/30", [])
        b, t = nets.bastion_ns, nets.target_ns
        try:
            _ip("netns", "add", b)
            nets._made.append(b)
            _ip("netns", "add", t)
            nets._made.append(t)
            _ip("link", "add", f"{b}h", "type", "veth", "peer", "name", f"{b}n")
            nets._made.append(f"link:{b}h")
            _ip("link", "set", f"{b}n", "netns", b)
            _ip("addr", "add", f"10.201.{k}.1/30", "dev", f"{b}h")
            _ip("link", "set", f"{b}h", "up")
            _ip("-n", b, "addr", "add", f"{nets.bastion_ip}/30", "dev", f"{b}n")
            _ip("-n", b, "link", "set", f"{b}n", "up")
            _ip("-n", b, "link", "set", "lo", "up")
            _ip("-n", b, "link", "add", f"{t}h", "type", "veth", "peer", "name", f"{t}n")
            _ip("-n", b, "link", "set", f"{t}n", "netns", t)
            _ip("-n", b, "addr", "add", f"10.202.{k}.1/30", "dev", f"{t}h")
            _ip("-n", b, "link", "set", f"{t}h", "up")
            _ip("-n", t, "addr", "add", f"{nets.target_ip}/30", "dev", f"{t}n")
            _ip("-n", t, "link", "set", f"{t}n", "up")
            _ip("-n", t, "link", "set", "lo", "up")
            _ip("route", "add", "unreachable", nets.blocked)
            nets._made.append(f"route:{nets.blocked}")
        except BaseException:
            nets.down()
            raise
        return nets

    def down(self, timeout: float = 5.0) -> None:
        """End the processes of both namespaces (only ours live there), then remove the route, links and names."""
        for ns in (self.target_ns, self.bastion_ns):
            if ns not in self._made:
                continue
            for pid in _pids(ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _pids(ns) and time.monotonic() < deadline:
                time.sleep(0.02)
            for pid in _pids(ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for made in reversed(self._made):
            kind, _, name = made.rpartition(":")
            if kind == "route":
                subprocess.run(["ip", "route", "del", "unreachable", name], capture_output=True)
            elif kind == "link":
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            else:
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._made.clear()
