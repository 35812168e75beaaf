"""A secret flag (`api-key: {secret: ORCH_API_KEY}`) end to end over the loopback sshd.

The value reaches SGLang's command line through the launch's shell, from the environment the launch
channel's stdin carried: never `cmd.sh`, the store, a report, `classify` output or any other file the
orchestrator writes on the host. The simulated host enforces the key as SGLang's middleware does
(401 without it), so the probes pass only if the orchestrator authenticates with it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.model import Cell, Phase
from orchestrator.sweep.engine import SweepHooks
from tests.e2e.test_faults_secrets import leaks
from tests.faults_support import cli, reap, run_sweep, write_hosts, write_matrix, write_scenario
from tests.sshd_host import SshdHost

KEY = "sk-FLAGKEY-9Zq81mPxRt"
CLEAR = "sk-CLEARTEXT-4Wt7YuQe"
"""Given in clear text after `run --`: turned into a secret, with a warning."""
VALUES = {"api key": KEY, "clear-text api key": CLEAR}


@dataclass
class Swept:
    root: Path
    workdir: Path
    hosts: Path
    db: Path
    outputs: dict[str, str] = field(default_factory=dict)
    results: dict[str, dict[str, object]] = field(default_factory=dict)


def _setup(root: Path, sshd: SshdHost) -> tuple[Path, Path, Path]:
    rule = {"when": {"served-model-name": "bad"}, "fail": {"at": "sampled_decode", "kind": "nan_in_probs"}}
    scenario = write_scenario(root / "scenario.yaml", [rule])
    workdir = root / "work"
    hosts = write_hosts(root / "hosts.yaml", workdir, scenario, sshd=sshd)
    matrix = write_matrix(
        root / "matrix.yaml",
        name="secret-flag",
        flags={"model-path": "/models/m", "tp-size": 1, "api-key": {"secret": "ORCH_API_KEY"}},
        probes={"settle_s": 0.1},
        matrix={"served-model-name": ["good", "bad"]},
    )
    return workdir, hosts, matrix


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, sshd: SshdHost) -> Iterator[Swept]:
    root = tmp_path_factory.mktemp("secret-flag")
    workdir, hosts, matrix = _setup(root, sshd)
    (root / "db").mkdir()
    host = Swept(root, workdir, hosts, root / "db" / "store.db")
    env = {"ORCH_API_KEY": KEY}
    try:
        done = cli("sweep", str(matrix), "--hosts", str(hosts), "--json-out", str(root / "db" / "table.json"),
                   db=host.db, env=env)  # fmt: skip
        host.outputs["sweep"] = done.stdout + done.stderr
        assert done.returncode == 0, host.outputs["sweep"]
        for name, argv in (("by reference", ["--api-key", "{secret:ORCH_API_KEY}"]), ("clear", ["--api-key", CLEAR])):
            ran = cli("run", "--hosts", str(hosts), "--host", "faulthost", "--json", "--", "--model-path", "/m",
                      *argv, db=host.db, env=env)  # fmt: skip
            host.outputs[f"run {name}"] = ran.stdout + ran.stderr
            assert ran.returncode == 0, ran.stderr
            host.results[f"run {name}"] = json.loads(ran.stdout)
        good = next(r for r in json.loads((root / "db" / "table.json").read_text())["cells"] if r["status"] == "pass")
        again = cli("repro", good["run_id"], "--hosts", str(hosts), "--json", db=host.db, env=env)
        host.outputs["repro"] = again.stdout + again.stderr
        assert again.returncode == 0, host.outputs["repro"]
        host.results["repro"] = json.loads(again.stdout)
        script = cli("repro", good["run_id"], "--script", db=host.db, env=env)
        host.outputs["repro --script"] = script.stdout + script.stderr
    finally:
        assert reap(workdir) == []
    sweep_id = host.outputs["sweep"].rsplit("sweep ", 1)[1].split()[0]
    commands = [["table", sweep_id, "--format", f, "--db", str(host.db)] for f in ("term", "md", "csv", "json")]
    commands += [["explain", sweep_id, "--format", "md", "--db", str(host.db)]]
    commands += [["bugreport", r, "--db", str(host.db)] for r in _run_ids(host)]
    commands += [["classify", str(log), "--json"] for log in workdir.glob("runs/*/server.log")]
    commands += [["classify", str(log)] for log in workdir.glob("runs/*/server.log")]
    for command in commands:
        result = CliRunner().invoke(app, command)
        # A passing run has no bug to report: refused with one line, which must hold no secret either.
        refused = command[0] == "bugreport" and "passed: there is no failure to report" in result.output
        assert result.exit_code == (1 if refused else 0), (command, result.output, result.exception)
        host.outputs[" ".join(command)] = result.stdout + result.stderr
    yield host


def _run_ids(host: Swept) -> list[str]:
    return [p.name for p in sorted(host.workdir.glob("runs/*"))]


def test_probes_authenticate_and_pass(swept: Swept) -> None:
    table = json.loads((swept.root / "db" / "table.json").read_text())
    assert sorted((c["status"], c.get("category")) for c in table["cells"]) == [
        ("fail", "nan_in_probs"),
        ("pass", "healthy"),
    ]
    assert swept.results["run by reference"]["status"] == "pass"
    assert swept.results["run clear"]["status"] == "pass"
    assert swept.results["repro"]["repro"]["status"] == "pass"  # type: ignore[index]


def test_a_clear_text_api_key_is_turned_into_a_secret_with_a_warning(swept: Swept) -> None:
    said = swept.outputs["run clear"]
    assert "--api-key is given in clear text" in said and "{secret:ORCH_API_KEY}" in said


def test_no_secret_value_in_the_store_outputs_or_files_the_orchestrator_writes(swept: Swept) -> None:
    files = list((swept.root / "db").glob("*"))
    assert swept.db in files
    for path in files:
        assert leaks(path.read_bytes(), VALUES) == [], f"secret in {path}"
    for what, text in swept.outputs.items():
        assert leaks(text.encode(), VALUES) == [], f"secret in the output of `{what}`"
    written = [p for p in swept.workdir.rglob("*") if p.is_file() and p.name != "server.log"]
    assert any(p.name == "cmd.sh" for p in written)
    for path in written:
        assert leaks(path.read_bytes(), VALUES) == [], f"secret in {path}"
    # The server itself prints its arguments (SGLang's server_args line): that is where the value
    # went, so the detector would have seen it anywhere else.
    logs = b"".join(p.read_bytes() for p in swept.workdir.glob("runs/*/server.log"))
    assert leaks(logs, VALUES) == ["api key", "clear-text api key"]
    classified = [v for k, v in swept.outputs.items() if k.startswith("classify") and k.endswith("--json")]
    assert len(classified) == 5 and all("api_key='***'" in text for text in classified)


def test_cmd_sh_is_private_and_reads_the_key_from_the_environment(swept: Swept) -> None:
    scripts = sorted(swept.workdir.glob("runs/*/cmd.sh"))
    assert len(scripts) == 5  # two cells, two runs, one repro
    for script in scripts:
        assert stat.S_IMODE(script.stat().st_mode) == 0o700
        text = script.read_text()
        assert '--api-key "${ORCH_API_KEY}"' in text
        assert '"${ORCH_API_KEY:?' in text
    assert "ORCH_API_KEY:?" in swept.outputs["repro --script"]


def test_the_simulated_host_enforces_the_key(tmp_path: Path, sshd: SshdHost, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir, hosts, matrix = _setup(tmp_path, sshd)
    monkeypatch.setenv("ORCH_API_KEY", KEY)
    answers: dict[str, int] = {}

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if event != "ready" or cell.flags.get("served-model-name") != "good":
            return
        script = next(p for p in workdir.glob("runs/*/cmd.sh") if "good" in p.read_text())
        port = int(re.search(r"--port (\d+)", script.read_text()).group(1))  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as http:
            answers["health, no key"] = http.get("/health").status_code
            answers["models, no key"] = http.get("/v1/models").status_code
            answers["models, wrong key"] = http.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code
            answers["generate, no key"] = http.post("/generate", json={"text": "hi"}).status_code
            answers["models, key"] = http.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code

    try:
        run_sweep(matrix, hosts, tmp_path / "store.db", hooks=SweepHooks(on_event=on_event))
    finally:
        assert reap(workdir) == []
    assert answers == {
        "health, no key": 200,
        "models, no key": 401,
        "models, wrong key": 401,
        "generate, no key": 401,
        "models, key": 200,
    }


def test_an_unset_secret_variable_is_a_clear_error_and_nothing_is_launched(tmp_path: Path, sshd: SshdHost) -> None:
    workdir, hosts, matrix = _setup(tmp_path, sshd)
    env = {k: v for k, v in os.environ.items() if k != "ORCH_API_KEY"}
    done = cli("sweep", str(matrix), "--hosts", str(hosts), db=tmp_path / "store.db", env={**env, "ORCH_API_KEY": ""})
    assert done.returncode != 0
    assert "ORCH_API_KEY" in done.stderr
    assert not list(workdir.glob("runs/*/pid"))
