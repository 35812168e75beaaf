"""The acceptance case for real: `orchestrator run --host gpu-box` through a bastion to a GPU host that nothing
else can reach (issue 16 items 1 and 8).

Two throwaway OpenSSH sshd, each in a network namespace of the test's own: the bastion reachable from here, the
target only from the bastion's namespace. hosts.yaml says `ssh: gpu-box` and `ssh_config: FILE`; FILE has a
`Host gpu-box` block whose `Include` brings in `ProxyJump jump` (an Include inside a Host block, read in that
block's context, as OpenSSH does). The simulated host runs behind the target's sshd, inside its namespace.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ConnectFailed
from orchestrator.transport import SshTarget, open_transport
from orchestrator.transport.ssh_target import resolve
from tests.netns import BastionNets, netns_missing
from tests.simhost import orchestrator, run_json, write_hosts
from tests.sshd_host import SshdHost, login_user, missing_tools

pytestmark = pytest.mark.ssh

FLAGS = ["--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--fp8-gemm-backend", "cutlass"]


@pytest.fixture
def bastion_and_target(sshd: SshdHost) -> Iterator[tuple[BastionNets, SshdHost, SshdHost]]:
    """The namespaces and an sshd in each; everything ended and removed afterwards, also on failure."""
    why = netns_missing() or (", ".join(missing_tools()) or None)
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but cannot build the bastion's network namespaces: {why}")
        pytest.skip(why)
    nets = BastionNets.up()
    started: list[SshdHost] = []
    try:
        user = login_user()
        started.append(SshdHost(user, listen=nets.bastion_ip, netns=nets.bastion_ns).start())
        started.append(SshdHost(user, listen=nets.target_ip, netns=nets.target_ns).start())
        yield nets, started[0], started[1]
    finally:
        for host in started:
            host.cleanup()
        nets.down()


def _reach(sshd: SshdHost) -> str:
    return (
        f"  HostName {sshd.listen}\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n"
    )


def test_run_reaches_the_gpu_host_only_through_the_bastion(
    bastion_and_target: tuple[BastionNets, SshdHost, SshdHost], tmp_path: Path
) -> None:
    nets, bastion, target = bastion_and_target
    # Nothing here reaches the target directly: the route is unreachable, and no packet leaves the machine.
    with pytest.raises(ConnectFailed), open_transport(target.target(connect_timeout=3.0)) as direct:
        direct.run("true")
    cluster = tmp_path / "cluster.conf"
    cluster.write_text(f"{_reach(target)}  ProxyJump jump\n")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu-box\n  Include {cluster}\nHost jump\n{_reach(bastion)}")
    assert resolve(SshTarget("gpu-box", ssh_config_path=str(config))).proxy_jump == ("jump",)
    hosts = write_hosts(
        tmp_path / "hosts.yaml", tmp_path / "work", transport="ssh", ssh="gpu-box", ssh_config=str(config),
        launcher=f"{sys.executable} -m orchestrator.sim",
    )  # fmt: skip
    result = orchestrator("run", "--host", "simhost", "--hosts", str(hosts), "--json", "--", *FLAGS,
                          db=tmp_path / "o.db", timeout=180)  # fmt: skip
    data = run_json(result)
    assert data["status"] == "pass", data
    assert bastion.accepted_logins() >= 1
    # Every login on the target came from the bastion's side of the inner veth: through the bastion.
    inner = nets.target_ip.rsplit(".", 1)[0] + ".1"
    sources = re.findall(r"Accepted publickey for \S+ from (\S+)", target.log.read_text())
    assert sources and set(sources) == {inner}, sources
    assert (tmp_path / "work" / "runs").is_dir()
