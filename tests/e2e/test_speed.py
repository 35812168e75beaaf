"""Which passing cell is fastest, and did the nightly make it slower (issue 37), through the CLI on the simulated host.

The simulated host serves at its scenario's `perf:` speed (output tokens/s of the whole server, times every
matching rule's factor, with seeded noise between repeats); the sweep measures every passing cell with the
matrix's `load:` after its probes passed, over the loopback sshd as on a real host.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import simhost
from tests.faults_support import FAST, HOST, cli, port_base, reap, write_matrix, write_scenario
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.slow

NAN = {"at": "sampled_decode", "kind": "nan_in_probs"}


def perf_scenario(path: Path, perf: dict[str, Any], rules: list[dict[str, Any]] | None = None) -> Path:
    scenario = write_scenario(path, rules or [], gpus=8)
    scenario.write_text(yaml.safe_dump({**yaml.safe_load(scenario.read_text()), "perf": perf}))
    return scenario


def sweep(tmp_path: Path, name: str, scenario: Path, matrix: dict[str, Any], sshd: SshdHost | None = None,
          *extra: str) -> tuple[str, dict[str, dict[str, Any]], str]:  # fmt: skip
    """Run one sweep; its id, its cells by attention backend (and graph batch size), and what it printed."""
    root = tmp_path / name
    root.mkdir()
    workdir = root / "work"
    hosts = simhost.write_hosts(root / "hosts.yaml", workdir, scenario=scenario, sshd=sshd, name=HOST,
                                deadlines={**FAST, "ready": "10s", "probe": "5s"}, port_base=port_base())  # fmt: skip
    matrix_path = write_matrix(root / "matrix.yaml", name="speed", flags={"model-path": "/models/m", "tp-size": 1},
                               probes={"settle_s": 0.1}, **matrix)  # fmt: skip
    try:
        done = cli("sweep", str(matrix_path), "--hosts", str(hosts), "--json-out", str(root / "out.json"), *extra,
                   db=tmp_path / "store.db", timeout=300)  # fmt: skip
    finally:
        reap(workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "out.json").read_text())
    cells = {"/".join(str(v) for k, v in c["flags"].items() if k in c["axes"]): c for c in data["cells"]}
    return data["sweep_id"], cells, done.stdout


def test_the_fastest_passing_cell_of_a_new_scenario_is_named_with_its_command(tmp_path: Path, sshd: SshdHost) -> None:
    # A scenario this code has not seen: each backend's and batch size's factors drawn here, far enough apart
    # that the fastest is the fastest beyond the 3% noise.
    draw = random.Random(37)
    backends = ["fa3", "triton", "torch_native", "flashinfer"]
    factors = dict(zip(backends, draw.sample([0.7, 1.0, 1.4, 2.0], 4), strict=True))
    sizes = dict(zip(["8", "16"], draw.sample([1.0, 1.25], 2), strict=True))
    rules = [{"when": {"attention-backend": b}, "factor": f} for b, f in factors.items()]
    rules += [{"when": {"cuda-graph-max-bs": int(s)}, "factor": f} for s, f in sizes.items()]
    broken = max(factors, key=lambda b: factors[b])  # the fastest backend is the one that dies on sampling
    scenario = perf_scenario(tmp_path / "scenario.yaml", {"tok_s": 300, "noise": 0.03, "rules": rules},
                             [{"when": {"attention-backend": broken}, "fail": NAN}])  # fmt: skip
    load = {"requests": 8, "concurrency": 4, "input_len": 32, "output_len": 32, "repeat": 3}
    matrix = {"matrix": {"attention-backend": backends, "cuda-graph-max-bs": [8, 16]}, "load": load}
    # One server at a time: eight loads side by side on a small shared test machine measure its CPU, not them.
    sweep_id, cells, printed = sweep(tmp_path, "one", scenario, matrix, sshd, "--serial")

    expected = {f"{b}/{s}": factors[b] * sizes[s] for b in backends if b != broken for s in sizes}
    fastest = max(expected, key=lambda key: expected[key])
    for key, cell in cells.items():
        if key.startswith(broken + "/"):
            assert cell["status"] == "fail" and cell["speed"] is None, cell
            continue
        assert cell["status"] == "pass", cell
        speed = cell["speed"]
        assert speed["valid"] is True and speed["why"] is None, speed
        assert speed["output_tok_s"]["min"] <= speed["output_tok_s"]["median"] <= speed["output_tok_s"]["max"]
        assert set(speed["ttft_ms"]) == {"p50", "p99"} and set(speed["itl_ms"]) == {"p50", "p99"}
        # The server's speed, shared by the requests in flight: measured within the prefills and the tail.
        assert 0.6 < speed["output_tok_s"]["median"] / (300 * expected[key]) <= 1.05, (key, speed["output_tok_s"])
    assert "tok/s" in printed

    best = json.loads(cli("table", sweep_id, "--best", "-f", "json", db=tmp_path / "store.db").stdout)["best"]
    backend, size = fastest.split("/")
    assert best["label"] == f"attention-backend={backend}, cuda-graph-max-bs={size}", (best, expected)
    assert f"--attention-backend {backend}" in best["command"] and f"--cuda-graph-max-bs {size}" in best["command"]
    text = cli("table", sweep_id, "--best", db=tmp_path / "store.db").stdout
    assert text.startswith(f"fastest passing cell of {sweep_id}: {best['label']}") and "command: " in text
    ranked = cli("table", sweep_id, "--sort", "speed", "-f", "csv", db=tmp_path / "store.db").stdout.splitlines()
    assert ranked[1].startswith(f"{backend},{size},")
    by_speed = sorted(expected, key=lambda key: -expected[key])
    assert [",".join(line.split(",")[:2]) for line in ranked[1:7]] == [k.replace("/", ",") for k in by_speed]

    explained = json.loads(cli("explain", sweep_id, "-f", "json", db=tmp_path / "store.db").stdout)
    effects = {(e["flag"], e["value"], e["versus"]) for e in explained["speed_effects"]}
    slow_size, fast_size = sorted(sizes, key=lambda s: sizes[s])
    assert ("cuda-graph-max-bs", fast_size, slow_size) in effects, explained["speed_effects"]
    passing = [b for b in backends if b != broken]
    for faster in passing:
        for slower in passing:
            # Never a value called faster than one it is not faster than; and a 1.4x difference or more always found.
            if factors[faster] <= factors[slower]:
                assert ("attention-backend", faster, slower) not in effects, (faster, slower, effects)
            elif factors[faster] >= 1.4 * factors[slower]:
                assert ("attention-backend", faster, slower) in effects, (faster, slower, effects)


def test_a_ten_percent_slowdown_is_a_regression_and_a_change_in_the_noise_is_not(tmp_path: Path) -> None:
    load = {"requests": 8, "concurrency": 4, "input_len": 32, "output_len": 64, "repeat": 3}
    matrix = {"matrix": {"attention-backend": ["fa3", "triton", "flashinfer"]}, "load": load}
    broken = [{"when": {"attention-backend": "flashinfer"}, "fail": NAN}]
    before = perf_scenario(tmp_path / "before.yaml", {"tok_s": 300, "noise": 0.03}, broken)
    nightly = {"tok_s": 300, "noise": 0.03, "rules": [
        {"when": {"attention-backend": "triton"}, "factor": 0.9},   # the nightly made triton 10% slower
        {"when": {"attention-backend": "fa3"}, "factor": 1.01},     # and fa3 1% faster: inside the noise
    ]}  # fmt: skip
    after = perf_scenario(tmp_path / "after.yaml", nightly, broken)
    old, _, _ = sweep(tmp_path, "before", before, matrix, None, "--serial")
    new, cells, _ = sweep(tmp_path, "after", after, matrix, None, "--serial")
    assert cells["triton"]["status"] == "pass" and cells["flashinfer"]["status"] == "fail"

    compared = cli("compare", old, new, "-f", "json", db=tmp_path / "store.db")
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    assert data["regressions"] == [] and data["fixes"] == []  # every cell passes or fails as before
    assert [r["cell_id"] for r in data["speed_regressions"]] == [cells["triton"]["cell_id"]], data
    regression = data["speed_regressions"][0]
    assert math.isclose(regression["change"], -0.1, abs_tol=0.04), regression
    assert regression["after"]["max"] < regression["before"]["min"]
    assert set(regression) >= {"cell_id", "before", "after", "change"}
    assert data["speed_improvements"] == [], data["speed_improvements"]
    term = cli("compare", old, new, db=tmp_path / "store.db").stdout
    assert "speed, output tok/s" in term and "(slower)" in term and "attention-backend=triton" in term


def test_a_load_that_lost_requests_or_got_short_answers_has_no_speed_and_says_why(tmp_path: Path) -> None:
    # This server does not honour ignore_eos, so answers end early; triton's hangs on the load's third request.
    rules = [{"when": {"attention-backend": "triton"}, "fail": {"on_request": 14, "kind": "hang"}}]
    scenario = perf_scenario(tmp_path / "scenario.yaml", {"tok_s": 400, "ignore_eos": False}, rules)
    load = {"requests": 8, "concurrency": 4, "input_len": 32, "output_len": 200, "repeat": 2}
    sweep_id, cells, printed = sweep(tmp_path, "one", scenario, {"matrix": {"attention-backend": ["fa3", "triton"]},
                                                                 "load": load})  # fmt: skip
    short = cells["fa3"]
    assert short["status"] == "pass" and short["speed"]["valid"] is False
    assert short["speed"]["output_tok_s"] is None and short["speed"]["ttft_ms"] is None
    assert "answers did not have the 200 tokens asked (repeat 1 of 2)" in short["speed"]["why"]
    lost = cells["triton"]
    assert lost["speed"]["valid"] is False and lost["speed"]["output_tok_s"] is None, lost
    assert "load requests failed (repeat 1 of 2" in lost["speed"]["why"]
    assert "no complete answer within 5 s" in lost["speed"]["why"]
    assert "invalid" in printed
    best = cli("table", sweep_id, "--best", db=tmp_path / "store.db").stdout
    assert "no fastest cell (none of the 2 passing cells has a valid speed" in best
