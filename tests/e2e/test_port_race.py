"""A port race is the orchestrator's problem, not the cell's: relaunched on another port beyond `retries: 0`, and
bounded, so a host whose ports are all taken does not loop; a proven verdict is never replaced by an infra one.

The simulated host's `port_in_use` failure prints what SGLang prints when one of the ports it derives from `--port`
is taken (a ZMQ bind), so the classifier names it `port_in_use` and the orchestrator's own port is to blame (infra).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from orchestrator.retries import PORT_RACE_RELAUNCHES
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store
from tests.fault_harness import our_processes
from tests.simhost import orchestrator, write_hosts

pytestmark = pytest.mark.slow

SCENARIO = {
    "version": "0.5.9",
    "gpus": 8,
    "timing": {"load_weights_s": 0.2},
    "rules": [{"when": {"attention-backend": "flashinfer"}, "fail": {"at": "model_load", "kind": "port_in_use"}}],
}
MATRIX = {
    "name": "port-race",
    "host": "simhost",
    "flags": {"model-path": "/models/m", "tp-size": 4},
    "matrix": {"attention-backend": ["triton", "flashinfer"]},
    "retries": 0,
}


def test_a_cell_that_keeps_losing_its_port_is_relaunched_on_other_ports_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(MATRIX))
    hosts = write_hosts(tmp_path / "hosts.yaml", tmp_path / "host", scenario=tmp_path / "scenario.yaml")
    db, out = tmp_path / "store.db", tmp_path / "out.json"
    try:
        done = orchestrator(
            "sweep", str(tmp_path / "matrix.yaml"), "--hosts", str(hosts), "--json-out", str(out), "--yes",
            db=db, timeout=300,
        )  # fmt: skip
    finally:
        assert our_processes(tmp_path) == []
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cells = {c["label"]: c for c in json.loads(out.read_text())["cells"]}
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        launches: dict[str, list[RunRecord]] = defaultdict(list)
        for run in sorted(store.runs(sweep.sweep_id), key=lambda r: r.attempt):
            if run.run_dir:
                launches[run.cell_id].append(run)
    raced, passed = cells["attention-backend=flashinfer"], cells["attention-backend=triton"]
    tries = launches[raced["cell_id"]]
    # retries: 0, yet relaunched PORT_RACE_RELAUNCHES times, each on a port it had not lost before, then given up.
    assert len(tries) == 1 + PORT_RACE_RELAUNCHES, [(r.attempt, r.port) for r in tries]
    assert len({r.port for r in tries}) == len(tries), [r.port for r in tries]
    assert (raced["status"], raced["category"], raced["attempts"], raced["infra_runs"]) == (
        "infra", "port_in_use", f"0/{1 + PORT_RACE_RELAUNCHES}", 1 + PORT_RACE_RELAUNCHES,
    )  # fmt: skip
    assert raced["retry_reason"].startswith(f"not relaunched: {1 + PORT_RACE_RELAUNCHES} port races"), raced
    assert (passed["status"], passed["attempts"], passed["infra_runs"]) == ("pass", "1/1", 0)
    assert len(launches[passed["cell_id"]]) == 1
