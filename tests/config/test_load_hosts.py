"""hosts.yaml: how each host is reached and launched on; secrets held only as references."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from orchestrator.config.load import builtin_sim_host, load_hosts
from orchestrator.config.model import EnvValue, HostConfig, SecretRef, masked_env, resolve_env
from orchestrator.errors import ConfigError, ConfigErrors
from tests.paths import REPO

HOSTS = REPO / "configs" / "hosts.yaml"


def shipped_hosts_copy(tmp_path: Path, text: str | None = None) -> Path:
    """configs/hosts.yaml in a folder of its own, with a stand-in for the scenario it names."""
    path = tmp_path / "hosts.yaml"
    if text is None:
        shutil.copy(HOSTS, path)
    else:
        path.write_text(text)
    (tmp_path / "sim").mkdir(exist_ok=True)
    (tmp_path / "sim" / "glm5-nvfp4-sm120.yaml").write_text("version: 0.5.9\n")
    return path


def errors_of(text: str, tmp_path: Path) -> list[ConfigError]:
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_hosts(path)
    return err.value.errors if isinstance(err.value, ConfigErrors) else [err.value]


def test_shipped_hosts(tmp_path: Path) -> None:
    hosts = load_hosts(shipped_hosts_copy(tmp_path))
    assert set(hosts) == {"sim", "local"}
    sim = hosts["sim"]
    assert sim.transport == "sim" and sim.gpus == 8
    assert sim.launcher.endswith(" -m orchestrator.sim") and sys.executable in sim.launcher
    assert sim.scenario == str((tmp_path / "sim" / "glm5-nvfp4-sm120.yaml").resolve())
    assert sim.workdir.startswith("/tmp/")
    assert sim.deadlines["model_load"] == 20
    assert hosts["local"].transport == "local" and hosts["local"].launcher == "python -m sglang.launch_server"


def test_shipped_hosts_in_place() -> None:
    sim = load_hosts(HOSTS)["sim"]
    assert sim.scenario == str((REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml").resolve())


def test_commented_real_host_example_is_valid(tmp_path: Path) -> None:
    lines = HOSTS.read_text().splitlines()
    start = lines.index("# blackwell:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(re.sub(r"^# ?", "", line))
    host = load_hosts(shipped_hosts_copy(tmp_path, "\n".join(block) + "\n"))["blackwell"]
    assert (host.transport, host.host, host.port, host.user) == ("ssh", "blackwell", None, None)
    assert host.env["HF_TOKEN"] == SecretRef("ORCH_HF_TOKEN")
    assert host.launcher_for("after") == "/opt/sglang-nightly/bin/python -m sglang.launch_server"
    assert host.env_for("after")["SGLANG_SANITIZE_NAN_LOGITS"] == "0"
    assert host.deadlines == {"model_load": 2400.0}
    assert not host.accept_new_host_keys and not host.kill_foreign_gpu_holders


@pytest.mark.parametrize(
    ("ssh", "user", "host", "port"),
    [
        ("gpu-box", None, "gpu-box", None),
        ("me@gpu-box", "me", "gpu-box", None),
        ("me@10.0.0.5:2222", "me", "10.0.0.5", 2222),
        ("'[::1]:22'", None, "::1", 22),
    ],
)
def test_ssh_targets(tmp_path: Path, ssh: str, user: str | None, host: str, port: int | None) -> None:
    (tmp_path / "hosts.yaml").write_text(f"h:\n  ssh: {ssh}\n")
    config = load_hosts(tmp_path / "hosts.yaml")["h"]
    assert (config.transport, config.user, config.host, config.port) == ("ssh", user, host, port)
    assert config.workdir == "~/orchestrator" and config.port_base == 30000 and config.python == "python3"


def test_host_errors_are_all_reported_with_lines(tmp_path: Path) -> None:
    text = (
        "a:\n"
        "  ssh: me@h:99999\n"
        "b: {gpus: 2}\n"
        "c: {transport: local, identity_file: ~/.ssh/x}\n"
        "d: {transport: sim, gpus: eight, deadlines: {redy: 1m}}\n"
        "e: {ssh: x, transprt: ssh}\n"
        "f: {ssh: x, env: {A: 1}, secrets: [B]}\n"
        "g: {transport: local, scenario: nope.yaml}\n"
        "h: {transport: sim, scenario: nope.yaml}\n"
    )
    errors = errors_of(text, tmp_path)
    assert [e.line for e in errors] == [2, 3, 4, 5, 5, 6, 7, 8, 9]
    messages = [e.message for e in errors]
    assert "is not user@host[:port]" in messages[0]
    assert "does not say how to reach it" in messages[1]
    assert "only applies to ssh hosts" in messages[2]
    assert errors[3].fix == "did you mean 'ready'?"
    assert "expected a valid integer" in messages[4]
    assert errors[5].fix == "did you mean 'transport'?"
    assert "secrets lists 'B'" in messages[6]
    assert "only applies to a simulated host" in messages[7]
    assert "does not exist" in messages[8]


def test_install_typo(tmp_path: Path) -> None:
    errors = errors_of("a:\n  ssh: x\n  installs:\n    after: {launchr: y}\n", tmp_path)
    assert [(e.line, e.fix) for e in errors] == [(4, "add `launcher: ...`"), (4, "did you mean 'launcher'?")]


def test_empty_hosts_file(tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text("# nothing yet\n")
    assert load_hosts(tmp_path / "hosts.yaml") == {}


def test_builtin_sim_host(tmp_path: Path) -> None:
    host = builtin_sim_host(str(tmp_path / "s.yaml"))
    assert host.transport == "sim" and host.gpus == 8 and host.scenario == str(tmp_path / "s.yaml")
    assert host.launcher.endswith(" -m orchestrator.sim") and host.python == sys.executable
    assert host.deadlines["ready"] < 120
    assert builtin_sim_host(None).scenario is None


def test_unknown_install_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="has no install 'after'"):
        HostConfig(name="h", transport="local").launcher_for("after")


def test_resolve_env_reads_secrets_at_launch() -> None:
    env: dict[str, EnvValue] = {
        "HF_TOKEN": SecretRef("ORCH_HF"),
        "MY_URL": "http://x",
        "PLAIN": "1",
        "DB_PASSWORD": "hunter2",
    }
    plain, secrets = resolve_env(env, {"ORCH_HF": "hf_abc"}, secret_names=["MY_URL"])
    assert plain == {"PLAIN": "1"}
    assert secrets == {"HF_TOKEN": "hf_abc", "MY_URL": "http://x", "DB_PASSWORD": "hunter2"}
    assert masked_env(env, ["MY_URL"]) == {"HF_TOKEN": "***", "MY_URL": "***", "PLAIN": "1", "DB_PASSWORD": "***"}


def test_missing_secret_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_env({"HF_TOKEN": SecretRef("ORCH_HF"), "X": SecretRef("ORCH_X")}, {})
    assert "ORCH_HF" in str(err.value) and "ORCH_X" in str(err.value)
    assert err.value.fix == "export ORCH_HF=... in the shell that runs the orchestrator"


def test_stored_form_masks_secrets(tmp_path: Path) -> None:
    text = "h:\n  ssh: x\n  env: {A_TOKEN: literal-tok, B: {secret: ORCH_B}, C: visible, D: hidden}\n  secrets: [D]\n"
    (tmp_path / "hosts.yaml").write_text(text)
    stored = load_hosts(tmp_path / "hosts.yaml")["h"].to_dict()
    assert stored["env"] == {"A_TOKEN": "***", "B": "***", "C": "visible", "D": "***"}
    assert "literal-tok" not in repr(stored) and "hidden" not in repr(stored)


def test_json_escaped_surrogate_pairs_are_refused_with_line_and_fix(tmp_path: Path) -> None:
    pair = "\\ud83d\\ude00"  # as JSON writes 😀: YAML reads two lone surrogates, which nothing can encode
    text = f'a:\n  ssh: "me@10.0.0.{pair}"\n  env: {{X: "{pair}"}}\n  "{pair}": 1\n'
    errors = errors_of(text, tmp_path)
    ours = [e for e in errors if "surrogate" in e.message]
    assert [(e.line, e.message.split(" contains ")[0]) for e in ours] == [
        (2, "a.ssh"), (3, "a.env.X"), (4, "a.\\ud83d\\ude00"),
    ]  # fmt: skip
    assert all(e.file == str(tmp_path / "hosts.yaml") and "\\U" in (e.fix or "") for e in ours)
    assert all(str(e).encode("utf-8") for e in ours)  # printable: no lone surrogate left in the message
    ok = tmp_path / "ok.yaml"
    ok.write_text('b:\n  ssh: "me@h:22"\n  workdir: "/w/\\U0001F600"\n')  # the escape the fix names
    assert load_hosts(ok)["b"].workdir == "/w/😀"


def test_an_ssh_host_remembers_its_file_and_line_for_connection_errors(tmp_path: Path) -> None:
    from orchestrator.host.session import transport_spec
    from orchestrator.transport.ssh_target import SshTarget, resolve

    path = tmp_path / "hosts.yaml"
    path.write_text("# my hosts\nlocal-box:\n  transport: local\ngpu:\n  gpus: 8\n  ssh: me@127.0.0.1:2222\n")
    spec = transport_spec(load_hosts(path)["gpu"])
    assert isinstance(spec, SshTarget)
    assert resolve(spec).origin == f"{path}:6 (host 'gpu')"


@pytest.mark.parametrize(
    ("ssh", "said"),
    [
        ("me@gpu-box:99999", "port 99999 is out of range (1-65535)"),
        ("me@gpu-box:0", "port 0 is out of range (1-65535)"),
        ("me@gpu-box:ssh", "port 'ssh' is not a number"),
        ("me@gpu-box:", "port '' is not a number"),
    ],
)
def test_a_bad_ssh_port_is_named(tmp_path: Path, ssh: str, said: str) -> None:
    text = f"box:\n  ssh: '{ssh}'\n  launcher: /x -m sglang.launch_server\n  workdir: /w\n"
    (error,) = errors_of(text, tmp_path)
    assert error.line == 2 and said in str(error), str(error)
    assert "ssh: me@gpu-box:22" in (error.fix or "")


def test_an_empty_launcher_is_an_error_not_the_default(tmp_path: Path) -> None:
    # `launcher: ''` would launch `python -m sglang.launch_server` from the PATH: another install than meant.
    text = "box:\n  ssh: me@gpu-box:22\n  launcher: ''\n  installs:\n    old: {launcher: ' '}\n"
    errors = errors_of(text, tmp_path)
    assert [(e.line, "launcher is empty" in str(e)) for e in errors] == [(3, True), (5, True)], [str(e) for e in errors]
