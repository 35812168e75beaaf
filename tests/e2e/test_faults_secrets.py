"""Secrets reach the server's environment and nothing else: not the store, reports, printed output or files.

Four kinds, each with a distinctive value: a `{secret: VAR}` reference in the hosts file and one in the
matrix, a literal under a secret-looking name (OPENAI_API_KEY), and a literal the host lists under
`secrets:`. The store's bytes (database, WAL, shared memory), every file the launches left on the host,
and every command's output are searched for each value and for its base64 at every alignment.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.model import Cell, Phase
from orchestrator.sweep.cell_run import AttemptResult
from orchestrator.sweep.engine import SweepHooks
from tests.faults_support import (
    cli,
    group_members,
    launch_pgids,
    reap,
    run_sweep,
    server_environs,
    write_hosts,
    write_matrix,
    write_scenario,
)
from tests.sshd_host import SshdHost

SECRETS = {
    "HF_TOKEN": "hf_SECRET_abc123XYZ",
    "WANDB_API_KEY": "wandb-SECRET-000LMN",
    "OPENAI_API_KEY": "sk-SECRET-api-456QRS",
    "MY_PRIVATE_URL": "https://u:pw-SECRET-789@models.example",
}
ORCH_VARS = {"ORCH_TEST_HF": SECRETS["HF_TOKEN"], "ORCH_TEST_WANDB": SECRETS["WANDB_API_KEY"]}
PLAIN = {"PLAIN_SETTING": "visible-value-42"}
API_KEY_FLAG = "sk-FLAG-SECRET-777TUV"
"""An `api-key:` flag value written in clear text in the matrix: turned into a secret (with a warning), so only
the server's own log holds it (SGLang prints its arguments); cmd.sh, the store, reports and classify must not."""


def forms(secret: str) -> list[bytes]:
    """The secret and its base64 at each of the three alignments it can have inside a longer encoded text."""
    raw = secret.encode()
    found = [raw]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw + b"\0\0\0")
        # The first and last 4 characters also encode the padding; the rest is the secret's alone.
        found.append(encoded[4:-8])
    return found


def leaks(data: bytes, secrets: dict[str, str] = SECRETS) -> list[str]:
    """Names of the secrets whose value or base64 occurs in `data`."""
    return [name for name, value in secrets.items() if any(form in data for form in forms(value))]


@dataclass
class Host:
    """A simulated host whose environment carries all four secrets, and a matrix of a passing and a failing cell."""

    root: Path
    workdir: Path
    hosts: Path
    matrix: Path
    db: Path
    outputs: dict[str, str] = field(default_factory=dict)
    """What each command printed (stdout and stderr)."""


def _host(root: Path, sshd: SshdHost | None = None) -> Host:
    rule = {"when": {"served-model-name": "bad"}, "fail": {"at": "sampled_decode", "kind": "nan_in_probs"}}
    scenario = write_scenario(root / "scenario.yaml", [rule])
    workdir = root / "work"
    env = {
        "HF_TOKEN": {"secret": "ORCH_TEST_HF"},
        "OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"],
        "MY_PRIVATE_URL": SECRETS["MY_PRIVATE_URL"],
        **PLAIN,
    }
    hosts = write_hosts(root / "hosts.yaml", workdir, scenario, sshd=sshd, env=env, secrets=["MY_PRIVATE_URL"])
    matrix = write_matrix(
        root / "matrix.yaml",
        name="secrets",
        flags={"model-path": "/models/m", "tp-size": 1, "api-key": API_KEY_FLAG},
        env={"WANDB_API_KEY": {"secret": "ORCH_TEST_WANDB"}},
        probes={"settle_s": 0.1},
        matrix={"served-model-name": ["good", "bad"]},
    )
    (root / "db").mkdir()
    return Host(root, workdir, hosts, matrix, root / "db" / "store.db")


def _scan(host: Host) -> None:
    """No secret in the store's files, the host's run files, or anything printed."""
    store = list(host.db.parent.glob("*"))
    assert host.db.exists()
    everything = {**SECRETS, "api-key flag": API_KEY_FLAG}
    for path in store:
        assert leaks(path.read_bytes(), everything) == [], f"secret in {path}"
    for path in (p for p in host.workdir.rglob("*") if p.is_file()):
        # The server's own log holds the api-key as SGLang printed it; nothing the orchestrator wrote does.
        assert leaks(path.read_bytes(), SECRETS if path.name == "server.log" else everything) == [], f"secret in {path}"
    for what, text in host.outputs.items():
        assert leaks(text.encode(), everything) == [], f"secret in the output of `{what}`"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """One sweep through the CLI, then every report command on it."""
    host = _host(tmp_path_factory.mktemp("secrets"))
    db = str(host.db)
    try:
        done = cli("sweep", str(host.matrix), "--hosts", str(host.hosts), "--db", db,
                   "--json-out", str(host.root / "db" / "table.json"), db=host.db, env=ORCH_VARS)  # fmt: skip
        host.outputs["sweep"] = done.stdout + done.stderr
        assert done.returncode == 0, host.outputs["sweep"]
        ran = cli("run", "--hosts", str(host.hosts), "--host", "faulthost", "--json", "--", "--model-path", "/m",
                  "--served-model-name", "bad", db=host.db, env=ORCH_VARS)  # fmt: skip
        host.outputs["run --json"] = ran.stdout + ran.stderr
        assert ran.returncode == 0 and json.loads(ran.stdout)["category"] == "nan_in_probs", ran.stderr
    finally:
        assert reap(host.workdir) == []
    sweep_id = host.outputs["sweep"].rsplit("sweep ", 1)[1].split()[0]
    commands = [["table", sweep_id, "--format", f] for f in ("term", "md", "csv", "json")]
    commands += [["explain", sweep_id, "--format", f] for f in ("term", "md", "json")]
    commands += [["compare", sweep_id, sweep_id, "--format", f] for f in ("term", "md", "json")]
    commands += [["classify", str(log), "--json"] for log in host.workdir.glob("runs/*/server.log")]
    for command in commands:
        # In this process: these only read the store, and an interpreter start each would double the time.
        result = CliRunner().invoke(app, [*command, "--db", str(host.db)] if command[0] != "classify" else command)
        assert result.exit_code == 0, (command, result.output, result.exception)
        host.outputs[" ".join(command)] = result.stdout + result.stderr
    yield host


def test_the_detector_finds_a_secret_in_any_base64_alignment() -> None:
    for prefix in (b"", b"a", b"ab", b"abc", b"HF_TOKEN="):
        for name, value in SECRETS.items():
            assert leaks(b"<" + base64.b64encode(prefix + value.encode() + b"tail") + b">") == [name]
    assert leaks(b"hf_SECRET_abc123XY") == []


def test_no_secret_in_the_store_the_run_files_or_any_output(swept: Host) -> None:
    _scan(swept)
    explained = next(
        text for command, text in swept.outputs.items() if command.endswith("--format md") and "explain" in command
    )
    assert "nan_in_probs" in explained, "the failing cell's evidence was stored and explained"


def test_the_run_files_name_the_secrets_without_their_values(swept: Host) -> None:
    runs = sorted(swept.workdir.glob("runs/*"))
    assert len(runs) == 3
    for run in runs:
        masked, script = (run / "env.masked").read_text(), (run / "cmd.sh").read_text()
        # `orchestrator run` has no matrix, so no WANDB_API_KEY; the sweep's two runs have all four.
        names = [n for n in SECRETS if f"{n}=***" in masked]
        assert set(names) >= {"HF_TOKEN", "OPENAI_API_KEY", "MY_PRIVATE_URL"}, masked
        assert "PLAIN_SETTING=visible-value-42" in masked
        # A reproduction script demands the secrets from its user's environment instead of holding them.
        assert [n for n in SECRETS if f'"${{{n}:?' in script] == names
    assert sum("WANDB_API_KEY=***" in (run / "env.masked").read_text() for run in runs) == 2


@pytest.mark.parametrize("over", ["local", "ssh"])
def test_the_secrets_reach_the_server_environment_and_no_command_line(
    tmp_path: Path, over: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = _host(tmp_path, request.getfixturevalue("sshd") if over == "ssh" else None)
    for name, value in ORCH_VARS.items():
        monkeypatch.setenv(name, value)
    environs: dict[str, dict[str, str]] = {}
    command_lines: list[bytes] = []
    wal: list[bytes] = []

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if event == "ready":
            environs.update(server_environs(host.workdir))
            for pgid in launch_pgids(host.workdir):
                for pid in group_members(pgid):
                    try:
                        command_lines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
                    except OSError:
                        continue

    def on_result(result: AttemptResult) -> None:
        # The write-ahead log as it is while the store is open (a clean close folds it into the database).
        with contextlib.suppress(FileNotFoundError):
            wal.append(Path(f"{host.db}-wal").read_bytes())

    try:
        run_sweep(host.matrix, host.hosts, host.db, hooks=SweepHooks(on_event=on_event, on_result=on_result))
    finally:
        assert reap(host.workdir) == []
    assert len(environs) == 2
    for seen in environs.values():
        assert {name: seen.get(name) for name in [*SECRETS, *PLAIN]} == {**SECRETS, **PLAIN}
    assert command_lines and all(leaks(line) == [] for line in command_lines)
    assert any(wal) and all(leaks(data, {**SECRETS, "api-key flag": API_KEY_FLAG}) == [] for data in wal)
    _scan(host)
