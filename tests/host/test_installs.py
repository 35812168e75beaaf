"""Environments as an axis on the simulated host: two installs of SGLang on one host, swept and compared."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.analysis.compare import compare, split_by_install
from orchestrator.config.model import HostConfig, InstallConfig
from orchestrator.host.installs import absolute_scenario
from orchestrator.host.session import HostSession
from orchestrator.store import Store
from orchestrator.transport.local import LocalTransport
from tests.analysis.test_compare import AXES_0523, _all_pass
from tests.analysis.test_inputs import matrix, view
from tests.cli.test_compare import MATRIX, compare_json, sim_host, sweep
from tests.paths import REPO

SIM = f"{sys.executable} -m orchestrator.sim --scenario"
INSTALLS = f"""\
  installs:
    before: {{launcher: "{SIM} tests/data/sim-0.5.9.yaml"}}
    after: {{launcher: "{SIM} tests/data/sim-0.5.23-regressed.yaml"}}
"""
"""Relative scenario paths, as a user writes them from the repository root."""


def test_a_relative_scenario_in_a_launcher_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    words = ["python", "-m", "orchestrator.sim", "--scenario", "s.yaml", "--x", "--scenario=t.yaml"]
    assert absolute_scenario(words) == [*words[:4], str(tmp_path / "s.yaml"), "--x", f"--scenario={tmp_path}/t.yaml"]


def test_an_install_python_on_the_host_is_written_once_not_under_running_launches(tmp_path: Path) -> None:
    # Every cell worker of a sweep opens a session of its own; rewriting the script while another worker's
    # launch execs it fails that launch with ETXTBSY ("Text file busy"), seen as a cell that exits 126.
    config = HostConfig(name="simx", transport="sim", workdir=str(tmp_path), python=sys.executable,
                        scenario=str(REPO / "tests/data/sim-0.5.9.yaml"))  # fmt: skip
    first, second = HostSession(config, LocalTransport()), HostSession(config, LocalTransport())
    try:
        python = Path(first.launcher_words()[0])
        written = python.stat()
        assert second.launcher_words()[0] == str(python)
        assert python.stat().st_ino == written.st_ino and python.stat().st_mtime_ns == written.st_mtime_ns
        python.write_text("#!/bin/sh\nexit 3\n")  # not the install's script: the next session puts it back
        third = HostSession(config, LocalTransport())
        assert third.launcher_words()[0] == str(python) and "sglang" in python.read_text()
        assert python.stat().st_mode & 0o111
        third.close()
    finally:
        first.close()
        second.close()


def test_each_install_of_a_simulated_host_reports_its_own_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    installs = {
        "before": InstallConfig("before", f"{SIM} tests/data/sim-0.5.9.yaml"),
        "after": InstallConfig("after", f"{SIM} tests/data/sim-0.5.23-regressed.yaml"),
    }
    config = HostConfig(name="simx", transport="sim", workdir=str(tmp_path), python=sys.executable, installs=installs)
    session = HostSession(config, LocalTransport())
    try:
        # Each install is a python of its own on the host, as a real one is; its script names the scenario.
        words = session.launcher_words("after")
        assert words[1:] == ["-m", "sglang.launch_server"] and words[0].endswith("/sim-installs/after/bin/python")
        assert str(REPO / "tests/data/sim-0.5.23-regressed.yaml") in Path(words[0]).read_text()
        assert (session.sglang_version("before"), session.sglang_version("after")) == ("0.5.9", "0.5.23")
        assert session.packages("after")["torch"] == "2.14.1"
        assert session.packages("before")["torch"] == "2.9.1"
        assert session.grammar("before").lookup("--nsa-decode-backend") is not None
        assert session.grammar("after").lookup("--nsa-decode-backend") is None
        assert session.grammar("after").lookup("--dsa-decode-backend") is not None
    finally:
        session.close()


def test_split_by_install_gives_each_install_its_own_versions() -> None:
    cells = [replace(c, install=i) for i in ("before", "after") for c in matrix(AXES_0523, _all_pass)]
    packages = {"sglang[before]": "0.5.9", "torch[before]": "2.9.1", "sglang[after]": "0.5.23", "torch[after]": "2.14"}
    parts = split_by_install(view(cells, version=None, packages={**packages, "cuda": "12.9"}))
    assert (parts["before"].sglang_version, parts["after"].sglang_version) == ("0.5.9", "0.5.23")
    assert parts["after"].packages == {"cuda": "12.9", "torch": "2.14"}
    assert compare(parts["before"], parts["after"]).env_diff == {
        "sglang": ("0.5.9", "0.5.23"),
        "torch": ("2.9.1", "2.14"),
    }


def test_a_sweep_over_two_installs_compares_install_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(sim_host("simx", tmp_path / "work", INSTALLS))
    matrix_file = tmp_path / "m.yaml"
    matrix_file.write_text(MATRIX.format(name="installs", host="simx") + "installs: [before, after]\n")
    db = tmp_path / "o.db"
    sweep_id = sweep(db, hosts, matrix_file)

    data = compare_json(db, sweep_id, "--installs", "before,after")

    assert [(c["flags"]["attention-backend"], c["flags"]["dsa-decode-backend"]) for c in data["regressions"]] == [
        ("flashinfer", "flashmla_kv")
    ]
    assert data["env_diff"]["sglang"] == ["0.5.9", "0.5.23"]
    assert data["env_diff"]["torch"] == ["2.9.1", "2.14.1"]
    assert data["added"] == data["removed"] == data["fixes"] == data["changed"] == []
    assert data["matched"] == 4
    with Store(db, create=False) as store:
        versions = store.get_sweep(sweep_id).versions
        runs = store.runs(sweep_id)
    assert (versions["sglang[before]"], versions["sglang[after]"]) == ("0.5.9", "0.5.23")
    assert sorted(str(r.install) for r in runs) == ["after"] * 4 + ["before"] * 4
    # Each run went through its install's own python (which names that install's scenario).
    assert all(f"/sim-installs/{r.install}/bin/python -m sglang.launch_server" in r.command for r in runs)
