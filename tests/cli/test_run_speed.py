"""`orchestrator run` says how fast a passing server served the standard load, as the table's `tok/s` does.

Through the CLI on the simulated host (a real server process serving at its scenario's `perf:` speed): the
human output prints the figure and what it was measured under; `--json` adds `speed` beside the keys it had.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.cli.run import speed_line
from orchestrator.store.sqlite import Store
from tests import simhost
from tests.faults_support import FAST, HOST, cli, port_base, reap, write_scenario

TOK_S = 3000
FLAGS = ("--", "--model-path", "/models/m", "--tp-size", "1")
NAN = {"at": "sampled_decode", "kind": "nan_in_probs"}
SPEED = re.compile(
    r"^speed: (\d+) ± (\d+) output tok/s \(median ± half the spread of 3 repeats; TTFT p50 [\d.]+ ms, "
    r"ITL p50 [\d.]+ ms; 32 requests, concurrency 8, 256 tokens in, 128 out\)$",
    re.MULTILINE,
)


@pytest.mark.slow
def test_a_passing_run_prints_its_speed_and_its_json_carries_it(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path / "scenario.yaml", [{"when": {"attention-backend": "triton"}, "fail": NAN}])
    perf = {"tok_s": TOK_S, "noise": 0.0, "rules": []}
    scenario.write_text(yaml.safe_dump({**yaml.safe_load(scenario.read_text()), "perf": perf}))
    workdir, db = tmp_path / "work", tmp_path / "store.db"
    hosts = simhost.write_hosts(tmp_path / "hosts.yaml", workdir, scenario=scenario, name=HOST,
                                deadlines={**FAST, "ready": "10s", "probe": "10s"}, port_base=port_base())  # fmt: skip
    on_host = ("run", "--host", HOST, "--hosts", str(hosts))
    try:
        shown = cli(*on_host, *FLAGS, "--attention-backend", "fa3", db=db, timeout=180)
        as_json = cli(*on_host, "--json", *FLAGS, "--attention-backend", "fa3", db=db, timeout=180)
        failing = cli(*on_host, "--json", *FLAGS, "--attention-backend", "triton", db=db, timeout=180)
    finally:
        reap(workdir)

    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert re.search(r"^pass \(simulated host\)  phase=", shown.stdout, re.MULTILINE), shown.stdout
    found = SPEED.findall(shown.stdout)
    assert len(found) == 1, shown.stdout
    median = int(found[0][0])
    # The whole server's output tokens/s, less what the prefills and the last wave's tail leave idle.
    assert TOK_S * 0.5 < median <= TOK_S * 1.05, shown.stdout
    # What was printed is the figure the store keeps for that run (what table, compare and explain read).
    run_id = re.search(r"^run (\S+) · run dir", shown.stdout, re.MULTILINE)
    assert run_id is not None, shown.stdout
    with Store(db) as store:
        outcome = store.get_run(run_id.group(1)).outcome
    assert outcome is not None and outcome.speed is not None
    assert median == round(outcome.speed["output_tok_s"]["median"])

    assert as_json.returncode == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    # Extended, not changed: every key `run --json` gave before is still there.
    before = {"run_id", "sweep_id", "cell_id", "host", "flags", "status", "phase", "category", "ready_s", "probes",
              "warnings", "command", "run_dir", "log", "versions", "took_s", "simulated"}  # fmt: skip
    assert before <= set(payload), sorted(before - set(payload))
    assert payload["status"] == "pass" and payload["speed"]["valid"] is True, payload.get("speed")
    assert TOK_S * 0.5 < payload["speed"]["output_tok_s"]["median"] <= TOK_S * 1.05
    assert payload["speed"]["load"] == {"requests": 32, "concurrency": 8, "input_len": 256, "output_len": 128,
                                        "repeat": 3}  # fmt: skip

    failed = json.loads(failing.stdout)
    assert failed["status"] == "fail" and failed["category"] == "nan_in_probs", failing.stdout
    assert failed["speed"] is None  # nothing was measured: a probe failed first


def _payload(status: str, speed: dict[str, Any] | None) -> dict[str, Any]:
    return {"status": status, "speed": speed}


def test_a_run_with_no_figure_says_why_and_a_failing_or_unmeasured_one_says_nothing() -> None:
    invalid = {"valid": False, "why": "3 of 32 load requests failed (repeat 1 of 3)", "output_tok_s": None}
    assert speed_line(_payload("pass", invalid)) == (
        "speed: invalid, no figure kept: 3 of 32 load requests failed (repeat 1 of 3)"
    )
    assert speed_line(_payload("pass", None)) is None  # load: off
    assert speed_line(_payload("fail", invalid)) is None
