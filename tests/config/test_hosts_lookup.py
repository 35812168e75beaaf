"""hosts.yaml `ssh_config:` and where the hosts file is looked for (issue 16, items 2 and 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.common import hosts_candidates, resolve_host
from orchestrator.config.load import load_hosts
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.host.session import transport_spec
from orchestrator.transport.ssh_target import SshTarget, resolve


def test_ssh_config_is_read_and_relative_paths_are_next_to_the_hosts_file(tmp_path: Path) -> None:
    hosts = tmp_path / "team" / "hosts.yaml"
    hosts.parent.mkdir()
    hosts.write_text("a:\n  ssh: gpu-box\n  ssh_config: cluster/ssh_config\nb:\n  ssh: me@h:22\n")
    loaded = load_hosts(hosts)
    assert loaded["a"].ssh_config == str(tmp_path / "team" / "cluster" / "ssh_config")
    assert loaded["b"].ssh_config == "~/.ssh/config"
    spec = transport_spec(loaded["a"])
    assert isinstance(spec, SshTarget) and spec.ssh_config_path == loaded["a"].ssh_config


def test_ssh_config_typo_and_non_ssh_use_are_refused_with_line_and_fix(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("a:\n  ssh: gpu-box\n  ssh_confg: x\nb:\n  transport: local\n  ssh_config: x\n")
    with pytest.raises(ConfigErrors) as caught:
        load_hosts(hosts)
    errors = caught.value.errors
    assert [(e.line, e.fix) for e in errors] == [(3, "did you mean 'ssh_config'?"), (6, "remove ssh_config:")]


def test_config_file_opts_in_to_new_keys_and_sets_the_connect_timeout(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host box\n  StrictHostKeyChecking accept-new\n  ConnectTimeout 3\nHost other\n  Port 2\n")
    r = resolve(SshTarget("box", ssh_config_path=str(config)))
    assert r.accept_new_host_keys and r.connect_timeout == 3.0
    r = resolve(SshTarget("other", ssh_config_path=str(config)))
    assert not r.accept_new_host_keys and r.connect_timeout == 10.0


def test_hosts_file_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ORCHESTRATOR_HOSTS", raising=False)
    user = tmp_path / "home" / ".config" / "orchestrator" / "hosts.yaml"
    assert hosts_candidates(None) == [Path("configs/hosts.yaml"), user]
    user.parent.mkdir(parents=True)
    user.write_text("box:\n  ssh: u@user-file:22\n")
    assert resolve_host("box", scenario=None, hosts_file=None).host == "user-file"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "hosts.yaml").write_text("box:\n  ssh: u@cwd-file:22\n")
    assert resolve_host("box", scenario=None, hosts_file=None).host == "cwd-file"
    env_file = tmp_path / "env.yaml"
    env_file.write_text("box:\n  ssh: u@env-file:22\n")
    monkeypatch.setenv("ORCHESTRATOR_HOSTS", str(env_file))
    assert resolve_host("box", scenario=None, hosts_file=None).host == "env-file"
    given = tmp_path / "given.yaml"
    given.write_text("box:\n  ssh: u@given-file:22\n")
    assert resolve_host("box", scenario=None, hosts_file=given).host == "given-file"


def test_unknown_host_error_lists_the_files_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ORCHESTRATOR_HOSTS", raising=False)
    with pytest.raises(ConfigError) as caught:
        resolve_host("blackwell", scenario=None, hosts_file=None)
    message = str(caught.value)
    for tried in ("configs/hosts.yaml", ".config/orchestrator/hosts.yaml"):
        assert tried in message
    assert resolve_host("sim", scenario=None, hosts_file=None).transport == "sim"
    # A file the user named and that is missing is refused, never replaced by the defaults (the next test).
    monkeypatch.setenv("ORCHESTRATOR_HOSTS", str(tmp_path / "nowhere.yaml"))
    with pytest.raises(ConfigError, match=r"nowhere\.yaml, which does not exist"):
        resolve_host("blackwell", scenario=None, hosts_file=None)


def test_a_named_hosts_file_that_is_missing_is_refused_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.config.hosts import locate_hosts_file

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "hosts.yaml").write_text("box:\n  ssh: u@cwd-file:22\n")
    assert locate_hosts_file(None, {}) == Path("configs/hosts.yaml").expanduser()
    with pytest.raises(ConfigError) as caught:
        locate_hosts_file(Path("missing.yaml"), {})
    text = str(caught.value)
    assert text.startswith("missing.yaml: --hosts names missing.yaml, which does not exist")
    assert f"relative to the current directory, {tmp_path}" in text and "fix: give --hosts the path" in text
    with pytest.raises(ConfigError) as caught:
        locate_hosts_file(None, {"ORCHESTRATOR_HOSTS": str(tmp_path / "gone.yaml")})
    assert "$ORCHESTRATOR_HOSTS names" in str(caught.value) and "unset ORCHESTRATOR_HOSTS" in str(caught.value)
    with pytest.raises(ConfigError, match="which is a folder"):
        locate_hosts_file(tmp_path / "configs", {})
    env_file = tmp_path / "env.yaml"
    env_file.write_text("box: {ssh: u@env-file:22}\n")
    assert locate_hosts_file(None, {"ORCHESTRATOR_HOSTS": str(env_file)}) == env_file
    assert locate_hosts_file(Path("configs/hosts.yaml"), {"ORCHESTRATOR_HOSTS": str(tmp_path / "gone")}) == Path(
        "configs/hosts.yaml"
    )  # --hosts wins, and the variable is not even looked at


def test_an_unset_secret_variable_names_the_hosts_file_and_line(tmp_path: Path) -> None:
    from orchestrator.config.hosts import resolve_host_env

    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        "gpu:\n  ssh: me@127.0.0.1:2222\n  env:\n    PLAIN: '1'\n    HF_TOKEN: {secret: ORCH_TEST_UNSET_HF}\n"
        "  installs:\n    nightly:\n      launcher: python -m sglang.launch_server\n"
        "      env: {KEY: {secret: ORCH_TEST_UNSET_KEY}}\n"
    )
    host = load_hosts(hosts)["gpu"]
    with pytest.raises(ConfigErrors) as caught:
        resolve_host_env(host, host.env_for("nightly"), {})
    assert [(e.file, e.line) for e in caught.value.errors] == [(str(hosts), 5), (str(hosts), 9)]
    assert str(caught.value).startswith(f"{hosts}:5: environment variable ORCH_TEST_UNSET_HF is not set; HF_TOKEN")
    plain, secrets = resolve_host_env(host, host.env, {"ORCH_TEST_UNSET_HF": "hf_x"})
    assert plain == {"PLAIN": "1"} and secrets == {"HF_TOKEN": "hf_x"}
