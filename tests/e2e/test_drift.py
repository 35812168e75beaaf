"""Flags the server silently changed: recorded with their evidence line, marked in the table, weighed by what ran.

The simulated host applies the scenario's `override:` rules as SGLang's server_args.py does: the server runs
with another value, says so in one log line, and its `server_args` line and `/server_info` show the value it
runs with. Here a flashinfer launch is made to run triton (and then dies as triton does), and every launch has
its chunked prefill turned off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults_support import cli, reap, write_hosts, write_matrix, write_scenario

pytestmark = pytest.mark.slow

RULES: list[dict[str, Any]] = [
    {"when": {"attention-backend": "flashinfer"}, "override": {"flag": "attention-backend", "to": "triton"}},
    {"when": {"attention-backend": ["flashinfer", "triton"]}, "fail": {"at": "sampled_decode", "kind": "nan_in_probs"}},
    {"when": {"kv-cache-dtype": "bf16"}, "override": {"flag": "chunked-prefill-size", "to": "-1"}},
]


def test_every_drift_is_recorded_with_its_evidence_and_explain_weighs_what_ran(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path / "scenario.yaml", RULES, gpus=4)
    workdir = tmp_path / "work"
    hosts = write_hosts(tmp_path / "hosts.yaml", workdir, scenario, gpus=4)
    matrix = write_matrix(
        tmp_path / "matrix.yaml", name="drift", flags={"model-path": "/models/m", "tp-size": 1,
                                                        "chunked-prefill-size": 4096},
        matrix={"attention-backend": ["flashinfer", "triton", "fa3"], "kv-cache-dtype": ["bf16", "fp8_e4m3"]},
        probes={"settle_s": 0.1},
    )  # fmt: skip
    db = tmp_path / "store.db"
    try:
        done = cli("sweep", str(matrix), "--hosts", str(hosts), "--json-out", str(tmp_path / "out.json"), db=db)
    finally:
        reap(workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {(c["flags"]["attention-backend"], c["flags"]["kv-cache-dtype"]): c
             for c in json.loads((tmp_path / "out.json").read_text())["cells"]}  # fmt: skip
    for (backend, kv), cell in cells.items():
        drift = cell["drift"]
        expected = {"attention-backend"} if backend == "flashinfer" else set()
        if kv == "bf16":
            expected.add("chunked-prefill-size")
        assert set(drift) == expected, (backend, kv, drift)
        assert "retry_reason" in cell
    flash = cells[("flashinfer", "bf16")]["drift"]
    assert flash["attention-backend"]["asked"] == "flashinfer" and flash["attention-backend"]["used"] == "triton"
    assert "Use triton attention backend" in flash["attention-backend"]["evidence"]
    chunked = flash["chunked-prefill-size"]
    assert (chunked["asked"], chunked["used"]) == ("4096", "-1")
    assert "chunked prefill" in chunked["evidence"]
    # The morning reader cannot miss it: `*` on the row and a warning for the axis under test.
    assert "pass*" in done.stdout or "fail*" in done.stdout, done.stdout
    assert "warning: * attention-backend=flashinfer" in done.stdout, done.stdout

    explained = cli("explain", "--format", "json", db=db)
    assert explained.returncode == 0, explained.stderr
    data = json.loads(explained.stdout)
    nan = next(g for g in data["categories"] if g["category"] == "nan_in_probs")
    findings = [f for f in data["findings"] if f.get("category") == "nan_in_probs"]
    assert findings, data
    # Weighed by what ran, every failing cell ran triton: flashinfer, which never ran, is not blamed.
    assert "triton" in json.dumps(findings[0]) and "flashinfer" not in json.dumps(findings), findings
    assert any("drift" in note for note in nan["notes"]), nan["notes"]
