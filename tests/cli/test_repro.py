"""`orchestrator repro RUN`: the run's exact command, environment and probes again, in a new one-cell sweep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cli.repro import exit_code, secret_values
from orchestrator.config.model import EnvValue, SecretRef
from orchestrator.errors import ConfigError
from orchestrator.model import Category, Cell, Phase, Status, Verdict
from orchestrator.store import RunRecord, Store, SweepRecord
from tests.cli.test_compare import SIM_059, invoke, sim_host, sweep

SECRET = "hf_never-stored-9876543210"
NAN = Verdict(Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS)


def test_the_exit_code_says_whether_the_failure_reproduced() -> None:
    other = Verdict(Status.FAIL, Phase.GREEDY_DECODE, Category.ILLEGAL_MEMORY_ACCESS)
    assert exit_code(NAN, NAN) == 1
    assert exit_code(NAN, other) == 3
    assert exit_code(NAN, Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY)) == 0
    assert exit_code(NAN, Verdict(Status.INFRA, None, Category.UNKNOWN)) == 2


def test_secrets_are_read_through_their_references_and_every_missing_one_is_named() -> None:
    sources: dict[str, EnvValue] = {
        "HF_TOKEN": SecretRef("ORCH_HF"),
        "LITERAL_KEY": "from-hosts-yaml",
        "MASKED_KEY": "***",
    }
    environ = {"ORCH_HF": "a", "MASKED_KEY": "b", "OWN_TOKEN": "c"}
    names = ["HF_TOKEN", "LITERAL_KEY", "MASKED_KEY", "OWN_TOKEN"]
    assert secret_values(names, sources, environ) == {
        "HF_TOKEN": "a",
        "LITERAL_KEY": "from-hosts-yaml",
        "MASKED_KEY": "b",
        "OWN_TOKEN": "c",
    }
    with pytest.raises(ConfigError, match=r"ORCH_HF \(for HF_TOKEN\), OWN_TOKEN"):
        secret_values(names, sources, {"MASKED_KEY": "b"})


def test_a_masked_secret_on_the_command_line_is_read_again_from_its_variable(tmp_path: Path) -> None:
    db, hosts = tmp_path / "o.db", tmp_path / "hosts.yaml"
    hosts.write_text(sim_host("sim", tmp_path / "work"))
    with Store(db) as store:
        store.create_sweep(SweepRecord(sweep_id="s-x", name="m", host="sim", matrix_yaml="", started_at=0.0))
        store.save_cells("s-x", [Cell(cell_id="c1", flags={})])
        command = "python -m sglang.launch_server --api-key sk-live-1 --port 30000"
        store.create_run(
            RunRecord(
                run_id="r-x", sweep_id="s-x", cell_id="c1", attempt=1, host="sim", command=command, started_at=0.0
            )
        )
    result = invoke(["repro", "r-x", "--db", str(db), "--hosts", str(hosts)])
    # Checked before the host is contacted: the re-run would pass it as the sweep does, from the environment.
    assert result.exit_code == 2 and "API_KEY is not set" in result.output and "export API_KEY" in result.output
    assert b"sk-live-1" not in db.read_bytes()
    assert '--api-key "$API_KEY" --port "$PORT"' in invoke(["repro", "r-x", "--script", "--db", str(db)]).output


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """Two cells, a secret in their environment: deep_gemm dies at the first sampled request, cutlass passes."""
    tmp = tmp_path_factory.mktemp("repro-cli")
    hosts = tmp / "hosts.yaml"
    secret_env = "  env: {HF_TOKEN: {secret: ORCH_REPRO_CLI_TOKEN}, PLAIN: 'a b'}\n"
    hosts.write_text(sim_host("simc", tmp / "work", f"  scenario: {SIM_059}\n{secret_env}"))
    (tmp / "m.yaml").write_text(
        "name: repro-cli\nhost: simc\nflags: {model-path: /models/m, tp-size: 1, kv-cache-dtype: bf16}\n"
        "matrix: {fp8-gemm-backend: [deep_gemm, cutlass]}\nprobes: {settle_s: 0.2, concurrent_requests: 2}\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCH_REPRO_CLI_TOKEN", SECRET)
        sweep_id = sweep(tmp / "o.db", hosts, tmp / "m.yaml")
    yield tmp / "o.db", hosts, sweep_id


def _run_of(db: Path, sweep_id: str, backend: str) -> RunRecord:
    with Store(db, create=False) as store:
        return next(r for r in store.runs(sweep_id) if f"--fp8-gemm-backend {backend}" in r.command)


def test_repro_reruns_the_failure_in_a_new_sweep_and_leaves_the_original_alone(
    swept: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, hosts, sweep_id = swept
    original = _run_of(db, sweep_id, "deep_gemm")
    with Store(db, create=False) as store:
        before = store.runs(sweep_id)
    monkeypatch.setenv("ORCH_REPRO_CLI_TOKEN", SECRET)

    result = invoke(["repro", original.run_id[:8], "--db", str(db), "--hosts", str(hosts), "--json"])

    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert data["outcome"] == "the failure reproduced"
    for side in ("original", "repro"):
        assert (data[side]["status"], data[side]["phase"], data[side]["category"]) == (
            "fail",
            "sampled_decode",
            "nan_in_probs",
        )
        assert data[side]["failed_probe"] == "sampled"
    with Store(db, create=False) as store:
        assert store.runs(sweep_id) == before
        again = store.get_run(data["repro"]["run_id"])
        repro_sweep = store.get_sweep(again.sweep_id)
        cells = store.get_cells(again.sweep_id)
    assert repro_sweep.name == f"repro-{original.run_id}" and repro_sweep.settings["repro_of"] == original.run_id
    assert repro_sweep.settings["deadlines"] == store_settings(db, sweep_id)["deadlines"]
    assert [c.cell_id for c in cells] == [original.cell_id] and again.attempt == 1
    assert again.run_id != original.run_id and again.run_dir != original.run_dir
    assert again.command.replace(f"--port {again.port}", "") == original.command.replace(f"--port {original.port}", "")
    assert again.env_masked == original.env_masked and again.env_masked["HF_TOKEN"] == "***"
    assert again.env_masked["PLAIN"] == "a b"
    assert again.run_dir is not None
    for name in ("cmd.sh", "env.masked", "server.log"):
        assert SECRET not in (Path(again.run_dir) / name).read_text()
    assert SECRET.encode() not in db.read_bytes()
    # The repro's one-cell sweep is never "the latest": a bare table, explain or report shows the night's sweep.
    with Store(db, create=False) as store:
        latest = store.latest_sweep()
        assert latest is not None and latest.sweep_id == sweep_id
        assert repro_sweep.started_at > latest.started_at
    table = invoke(["table", "--db", str(db), "--format", "json"])
    assert table.exit_code == 0 and json.loads(table.output)["sweep_id"] == sweep_id
    assert json.loads(invoke(["table", again.sweep_id, "--db", str(db), "-f", "json"]).output)["sweep_id"] == (
        again.sweep_id
    )


def store_settings(db: Path, sweep_id: str) -> dict[str, object]:
    """The settings a sweep stored."""
    with Store(db, create=False) as store:
        return store.get_sweep(sweep_id).settings


def test_a_passing_run_passes_again_and_the_table_shows_both_verdicts(
    swept: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, hosts, sweep_id = swept
    monkeypatch.setenv("ORCH_REPRO_CLI_TOKEN", SECRET)
    result = invoke(["repro", _run_of(db, sweep_id, "cutlass").run_id, "--db", str(db), "--hosts", str(hosts)])
    assert result.exit_code == 0, result.output
    assert "no failure" in result.output and "failed probe" in result.output and "status" in result.output


def test_a_missing_secret_stops_the_rerun_before_anything_starts(
    swept: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, hosts, sweep_id = swept
    monkeypatch.delenv("ORCH_REPRO_CLI_TOKEN", raising=False)
    with Store(db, create=False) as store:
        count = len(store.list_sweeps())
    result = invoke(["repro", _run_of(db, sweep_id, "cutlass").run_id, "--db", str(db), "--hosts", str(hosts)])
    assert result.exit_code == 2
    assert "ORCH_REPRO_CLI_TOKEN (for HF_TOKEN)" in result.output
    with Store(db, create=False) as store:
        assert len(store.list_sweeps()) == count
