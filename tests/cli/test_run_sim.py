"""`orchestrator run` without --host: the simulated host, said so, from any directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.sim.scenario import DEFAULT_SCENARIO
from tests.fault_harness import cli_env
from tests.paths import REPO

pytestmark = pytest.mark.slow


def test_the_shipped_default_scenario_is_the_demos() -> None:
    assert DEFAULT_SCENARIO.read_text() == (REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml").read_text()


def test_run_without_a_host_says_it_is_simulated_from_any_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in cli_env().items() if k != "ORCHESTRATOR_HOSTS"} | {"PYTHONPATH": str(REPO)}
    flags = ["--", "--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--fp8-gemm-backend", "cutlass"]
    shown = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", *flags], cwd=tmp_path, capture_output=True, text=True,
        timeout=180, env=env,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("simulated host:"), shown.stdout
    assert "(simulated host)" in shown.stdout, shown.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--format", "json", *flags], cwd=tmp_path, capture_output=True,
        text=True, timeout=180, env=env,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    assert payload["simulated"] is True and payload["status"] in ("pass", "fail")
