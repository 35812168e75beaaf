"""`orchestrator repro --script`: a standalone bash script that reproduces one stored run.

The pure tests read the rendered text; the others run the script by hand (bash in a subprocess)
against launches of the simulated host, as someone handed the script would.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import StoreError
from orchestrator.model import Category, Cell, Phase, ProbeOutcome, ProbeResult, Status, Verdict
from orchestrator.report.repro import expected_failure, render_repro_script, repro_launch
from orchestrator.store import RunRecord, Store, SweepRecord
from tests.cli.test_compare import SIM_059, invoke, sim_host, sweep

SECRET = "hf_do-not-leak-0123456789"
ODD = "$(touch /tmp/pwned) 'x'"
CELL = Cell(cell_id="c0ffee0001", flags={"fp8-gemm-backend": "deep_gemm"}, axes=("fp8-gemm-backend",))
SWEEP = SweepRecord(
    sweep_id="s-1",
    name="m",
    host="sim",
    matrix_yaml="",
    started_at=0.0,
    versions={"sglang": "0.5.9"},
    settings={"deadlines": {"ready": 12.5, "probe": 7, "stop_grace": 1}, "probes": {"concurrent_requests": 3}},
)
NAN = Verdict(Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, "RuntimeError: nan", failed_probe="sampled")
SAMPLED_FAILED = ProbeOutcome(True, 1.0, (ProbeResult("greedy", True), ProbeResult("sampled", False)))


def _run(**changes: object) -> RunRecord:
    values: dict[str, object] = {
        "run_id": "r-0123456789",
        "sweep_id": "s-1",
        "cell_id": CELL.cell_id,
        "attempt": 1,
        "host": "sim",
        "state": "done",
        "command": "python3 -m sglang.launch_server --model-path '/m/a b;x' --api-key '***' --hf-token=*** "
        "--host 127.0.0.1 --port 31000",
        "env_masked": {"HF_TOKEN": "***", "ODD": ODD, "CUDA_VISIBLE_DEVICES": "2,3"},
        "started_at": 0.0,
        "outcome": SAMPLED_FAILED,
        "verdict": NAN,
        **changes,
    }
    return RunRecord(**values)  # type: ignore[arg-type]


def test_the_script_quotes_every_value_and_names_secrets_without_values() -> None:
    text = render_repro_script(_run(), CELL, SWEEP)
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0
    assert ': "${HF_TOKEN:?HF_TOKEN must be set' in text and "export HF_TOKEN\n" in text
    assert ': "${API_KEY:?API_KEY must be set' in text and '--api-key "$API_KEY"' in text
    assert '--hf-token="$HF_TOKEN" --host 127.0.0.1' in text
    assert f"export ODD={shlex.quote(ODD)}\n" in text
    assert "'/m/a b;x'" in text and '--port "$PORT"' in text and "31000" not in text
    assert "export CUDA_VISIBLE_DEVICES=2,3" in text and "READY_TIMEOUT=13" in text and "PROBE_TIMEOUT=7.0" in text
    assert "PROBES='greedy sampled'" in text and '"concurrent": 3' in text
    assert "Original verdict: fail at sampled_decode: nan_in_probs; probe sampled failed" in text


def test_what_the_script_sends_follows_where_the_run_stopped() -> None:
    not_ready = _run(outcome=ProbeOutcome(False, process_died=True), verdict=None)
    passed = _run(outcome=ProbeOutcome(True, 1.0), verdict=Verdict(Status.PASS, Phase.AFTER_DECODE, Category.HEALTHY))
    assert "PROBES=''" in render_repro_script(not_ready, CELL, SWEEP)
    assert "PROBES='greedy sampled stream concurrent alive_after'" in render_repro_script(passed, CELL, SWEEP)
    assert [expected_failure(r) for r in (_run(), not_ready, passed)] == [
        ("probe", "sampled"),
        ("not_ready", ""),
        ("pass", ""),
    ]


def test_a_run_that_was_never_launched_has_nothing_to_reproduce() -> None:
    with pytest.raises(StoreError, match="never launched"):
        repro_launch(_run(command="", verdict=Verdict(Status.INVALID, Phase.PREFLIGHT, Category.INVALID_ARGUMENT)))
    with pytest.raises(StoreError, match="environment variable names"):
        repro_launch(_run(env_masked={"BAD NAME": "x"}))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A two-cell sweep on the simulated host: deep_gemm dies at the first sampled request, cutlass passes."""
    tmp = tmp_path_factory.mktemp("repro-script")
    hosts = tmp / "hosts.yaml"
    secret_env = "  env: {HF_TOKEN: {secret: ORCH_REPRO_TEST_TOKEN}}\n"
    hosts.write_text(sim_host("simr", tmp / "work", f"  scenario: {SIM_059}\n{secret_env}"))
    (tmp / "m.yaml").write_text(
        "name: repro\nhost: simr\nflags: {model-path: /models/m, tp-size: 1, kv-cache-dtype: bf16}\n"
        "matrix: {fp8-gemm-backend: [deep_gemm, cutlass]}\nprobes: {settle_s: 0.2, concurrent_requests: 2}\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCH_REPRO_TEST_TOKEN", SECRET)
        sweep_id = sweep(tmp / "o.db", hosts, tmp / "m.yaml")
    yield tmp / "o.db", sweep_id


def _script(db: Path, sweep_id: str, backend: str) -> str:
    with Store(db, create=False) as store:
        run = next(r for r in store.runs(sweep_id) if f"--fp8-gemm-backend {backend}" in r.command)
    result = invoke(["repro", run.run_id, "--script", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


def _bash(script: str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "PORT")}
    return subprocess.run(
        ["bash", "-c", script], env={**environ, "TMPDIR": str(tmp), **env}, capture_output=True, text=True, timeout=60
    )


def _group_gone(pgid: int) -> bool:
    """Whether the process group the script started is empty (its ranks too), allowing a moment for reaping."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_script_reproduces_nan_at_the_sampled_request(swept: tuple[Path, str], tmp_path: Path) -> None:
    db, sweep_id = swept
    script = _script(db, sweep_id, "deep_gemm")
    assert SECRET not in script and SECRET.encode() not in db.read_bytes()

    result = _bash(script, tmp_path, HF_TOKEN="any-value")

    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert re.search(r"probe greedy:\n.*\n  ok after", out)
    assert re.search(r"probe sampled:\n.*/v1/chat/completions.*\"temperature\": 0.7, \"top_p\": 0.95", out)
    assert "  FAILED after" in out and "DIED" in out and "the failure REPRODUCED: probe sampled failed" in out
    assert "probability tensor contains either `inf`, `nan` or element < 0" in out
    assert "--- first lines of the log matching error patterns ---" in out
    assert _group_gone(int(re.findall(r"server process (\d+)", out)[0]))


def test_a_passing_cell_script_exits_0(swept: tuple[Path, str], tmp_path: Path) -> None:
    db, sweep_id = swept
    result = _bash(_script(db, sweep_id, "cutlass"), tmp_path, HF_TOKEN="any-value")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "probe alive_after:" in result.stdout and "repro: no failure" in result.stdout
    assert _group_gone(int(re.findall(r"server process (\d+) is alive", result.stdout)[0]))


def test_the_script_refuses_to_start_without_its_secret(swept: tuple[Path, str], tmp_path: Path) -> None:
    db, sweep_id = swept
    result = _bash(_script(db, sweep_id, "cutlass"), tmp_path)
    assert result.returncode == 2
    assert "HF_TOKEN must be set" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_settings_a_store_of_another_release_wrote_are_read_as_far_as_known() -> None:
    # A sweep stored by another release may name a deadline or probe setting this one does not know:
    # repro and bugreport use what they know of it, instead of ending in a ValueError traceback.
    from orchestrator.report.repro import run_settings
    from tests.store.test_records import make_sweep

    sweep = make_sweep(
        settings={"deadlines": {"load": 600.0, "model_load": "20m"}, "probes": {"settle_s": 0.5, "x": 1}}
    )
    deadlines, probes = run_settings(sweep)
    assert deadlines.model_load == 1200.0 and probes.settle_s == 0.5
