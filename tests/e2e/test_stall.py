"""Slow or stuck: a launch that stops making progress is cut at its stall window; a slow one that keeps printing is not.

The simulated host's model load prints SGLang's checkpoint-shard bar. One cell's load hangs halfway through
(`after_progress: 0.5`): its verdict must be `hang_or_timeout` at model_load within about the stall window of
its last bar line, long before the phase's deadline, with that line as evidence. Another cell's load takes
twenty times its timing (`slow: {factor: 20}`), far longer than the stall window, printing throughout: it must
pass. A third checks that a bar redrawn at the same count, or a heartbeat repeated, is not progress.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from orchestrator.model import Phase, ProbeOutcome
from orchestrator.probe.progress import ProgressTracker
from orchestrator.store.sqlite import Store
from tests.faults_support import cli, reap, write_hosts, write_matrix, write_scenario

pytestmark = pytest.mark.slow

STALL_S = 3.0


def test_a_hang_is_cut_at_its_stall_window_and_a_slow_load_is_not(tmp_path: Path) -> None:
    rules = [
        {"when": {"attention-backend": "fa3"}, "fail": {"at": "model_load", "kind": "hang", "after_progress": 0.5}},
        {"when": {"attention-backend": "triton"}, "slow": {"at": "model_load", "factor": 20}},
    ]
    scenario = write_scenario(tmp_path / "scenario.yaml", rules, gpus=2)
    doc = yaml.safe_load(scenario.read_text())
    doc["timing"]["load_weights_s"] = 0.6  # 8 bar lines, 75 ms apart; twenty times slower: 12 s, one a second
    scenario.write_text(yaml.safe_dump(doc))
    workdir = tmp_path / "work"
    hosts = write_hosts(tmp_path / "hosts.yaml", workdir, scenario)
    matrix = write_matrix(
        tmp_path / "matrix.yaml", name="stall", flags={"model-path": "/models/m", "tp-size": 1},
        matrix={"attention-backend": ["fa3", "triton"]}, stall={"model_load": f"{STALL_S:g}s"},
        deadlines={"model_load": "60s", "ready": "90s"}, probes={"settle_s": 0.1},
    )  # fmt: skip
    started = time.monotonic()
    try:
        done = cli("sweep", str(matrix), "--hosts", str(hosts), "--json-out", str(tmp_path / "out.json"),
                   db=tmp_path / "store.db", timeout=120)  # fmt: skip
    finally:
        reap(workdir)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {c["flags"]["attention-backend"]: c for c in json.loads((tmp_path / "out.json").read_text())["cells"]}
    hung, slow = cells["fa3"], cells["triton"]
    assert (hung["status"], hung["phase"], hung["category"]) == ("fail", "model_load", "hang_or_timeout"), hung
    assert (slow["status"], slow["category"]) == ("pass", "healthy"), slow  # ~12 s of loading, never cut
    assert took < 50, "the hang was cut at its stall window, not at the 60 s deadline"

    stored = _outcome_of(tmp_path / "store.db", "fa3")
    assert stored.deadline_phase is Phase.MODEL_LOAD
    # Cut within 10% past the window after its last progress (polls are 25 ms apart).
    assert stored.stalled_s is not None and STALL_S <= stored.stalled_s <= STALL_S * 1.1, stored
    assert stored.last_progress is not None and "Loading safetensors checkpoint shards" in stored.last_progress
    assert " 4/8 " in stored.last_progress, "the bar stopped halfway"


def _outcome_of(db: Path, backend: str) -> ProbeOutcome:
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        cells = {c.cell_id: c for c in store.get_cells(sweep.sweep_id)}
        outcomes = [
            r.outcome for r in store.runs(sweep.sweep_id)
            if r.outcome is not None and cells[r.cell_id].flags.get("attention-backend") == backend
        ]  # fmt: skip
    assert outcomes, f"no run of {backend} with an outcome"
    return outcomes[-1]


def test_a_redrawn_bar_or_a_repeated_heartbeat_is_not_progress() -> None:
    tracker = ProgressTracker()
    bar = "Loading safetensors checkpoint shards:  47% Completed | 7/15 [00:{s}<00:23,  2.93s/it]"
    assert tracker.feed(bar.format(s=20))
    assert not tracker.feed(bar.format(s=41)), "the same count redrawn later"
    assert tracker.feed(bar.replace("47%", "53%").replace("7/15", "8/15").format(s=44))
    beat = "[2026-12-06 10:00:{s:02d} TP0] Decode batch. #running-req: 0, #token: 0, gen throughput (token/s): 0.00"
    assert tracker.feed(beat.format(s=1))
    assert not tracker.feed(beat.format(s=31)), "a heartbeat with a new timestamp"
    capture = "Capturing batches (bs={bs} avail_mem=11.18 GB):  {p}%|███| {i}/36 [00:01<00:10,  3.37it/s]"
    assert tracker.feed("\r".join(capture.format(bs=b, p=3 * i, i=i) for i, b in ((1, 256), (2, 248))))
    assert not tracker.feed(capture.format(bs=248, p=6, i=2)), "the count on one line's last redraw, again"
    assert tracker.last_line is not None and "2/36" in tracker.last_line
