"""A sweep over SSH whose flag value is over Linux's 128 KiB per-argument limit says `Argument list too long`, not
"the log names no cause"; and the run directories it makes are private (issue 33, weak)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.host.launcher import MAX_ARG_BYTES, LaunchSpec, oversized_words
from orchestrator.secret import SecretRef
from orchestrator.store.sqlite import Store
from tests.fault_harness import FaultHost
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh


def test_oversized_flag_value_is_refused_as_argument_list_too_long(sshd: SshdHost, tmp_path: Path) -> None:
    fh = FaultHost(tmp_path, sshd=sshd)
    long_name = "m" * (140 * 1024)
    fh.matrix_file.write_text(
        "name: e2big\n"
        f"flags: {{model-path: /models/tiny, tp-size: 1, served-model-name: {long_name}}}\n"
        "matrix:\n  attention-backend: [flashinfer]\nprobes: {settle_s: 0.2, concurrent_requests: 2}\n"
    )
    result = fh.cli("sweep", timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    table = fh.cli("table", "--format", "json", timeout=60)
    assert table.returncode == 0, table.stderr
    cells = json.loads(table.stdout)["cells"]
    assert len(cells) == 1
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        runs = store.runs(sweep.sweep_id)
    reasons = [r.verdict.reason for r in runs if r.verdict is not None]
    assert reasons and all("Argument list too long" in r for r in reasons), reasons
    assert all("--served-model-name is 143360 bytes" in r for r in reasons), reasons
    assert "names no cause" not in table.stdout
    assert cells[0]["status"] == "infra", cells


def test_run_directories_over_ssh_are_private(sshd: SshdHost, tmp_path: Path) -> None:
    fh = FaultHost(tmp_path, sshd=sshd)
    result = fh.cli("run", "--", "--model-path", "/models/tiny", "--attention-backend", "flashinfer", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = fh.workdir / "runs"
    (run_dir,) = list(runs.iterdir())
    assert [(p.name, p.stat().st_mode & 0o777) for p in (runs, run_dir)] == [("runs", 0o700), (run_dir.name, 0o700)]
    world_readable = [p.name for p in run_dir.iterdir() if p.stat().st_mode & 0o004]
    assert world_readable == [], world_readable
    assert (run_dir / "server.log").stat().st_size > 0


def test_an_oversized_secret_is_named_by_its_variable_never_shown() -> None:
    secret = "k" * MAX_ARG_BYTES + "k"
    spec = LaunchSpec(
        run_id="r-1", argv=("python", "-m", "sglang.launch_server", "--api-key", SecretRef("API_KEY"), "x" * 10),
        env={"BIG": "v" * MAX_ARG_BYTES, "SMALL": "1"}, secret_names=("API_KEY",), gpus=(0,), port=1, run_dir="/r",
    )  # fmt: skip
    found = oversized_words(spec, {"API_KEY": secret})
    assert found == [
        f"the value of --api-key is {len(secret)} bytes",
        f"environment variable BIG is {len('BIG=') + MAX_ARG_BYTES} bytes",
        f"environment variable API_KEY is {len('API_KEY=') + len(secret)} bytes",
    ]
    assert not any(secret[:20] in line for line in found)
    assert oversized_words(spec, {"API_KEY": "short"}) == [found[1]]
