"""Slow or stuck (issue 36): how soon a hang is cut after its last progress, and that a slow load is never cut.

Two sweeps on the simulated host (local transport), each with a stall window of STALL_S at model_load:
- hang: cells whose model load prints its checkpoint-shard bar for half its time, then nothing. While the sweep
  runs, this script watches each launch's server.log and process group itself (every 10 ms): the last time
  the log grew, and when the group was gone. The verdict is decided when the stop starts: the group's end
  less the stop's own duration (SIGTERM to exit, as the sweep timed it). `hang_detect_ratio` =
  (decided - last growth) / STALL_S, the worst cell (goal <= 1.1); the ratio to the group's end is printed too.
- slow: cells whose model load takes 20x its timing (SLOW_LOAD_S in all, far beyond the window), printing
  progress throughout. `slow_false_kills` counts those cut as hang_or_timeout (goal 0).
Then what one hung cell costs at the default deadlines and stall windows, in GPU-minutes of an 8-GPU launch.

Run alone: `.venv/bin/python scripts/bench_stall.py` (scripts/bench runs it too).
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench_env  # noqa: F401  (importing it puts the repository on sys.path)

from orchestrator.settings import Deadlines, Stall
from orchestrator.store.sqlite import Store
from tests.faults_support import reap, write_hosts, write_matrix, write_scenario
from tests.simhost import orchestrator

STALL_S = 2.0
LOAD_S = 1.0
SLOW_FACTOR = 20
GPUS_OF_A_BIG_LAUNCH = 8


def _watch(runs: Path, stop: threading.Event, seen: dict[str, dict[str, float]]) -> None:
    """Per run dir: when its server.log last grew, and when its process group (pid file) was first gone."""
    while not stop.is_set():
        now = time.time()
        for run in runs.glob("r-*") if runs.is_dir() else []:
            mark = seen.setdefault(run.name, {})
            log, pid_file = run / "server.log", run / "pid"
            size = log.stat().st_size if log.exists() else 0
            if size != mark.get("size"):
                mark["size"], mark["grew"] = size, now
            words = pid_file.read_text().split() if pid_file.exists() and "gone" not in mark else []
            if words and words[0].isdigit() and not _alive(int(words[0])):  # claimed empty, then written
                mark["gone"] = now
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """The launch's leader still runs (a zombie left for init to reap is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _stop_s(db: Path) -> dict[str, float]:
    """Run id -> how long its stop took (SIGTERM to the group gone), as the sweep recorded it."""
    with Store(db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        return {r.run_id: float(r.timings.get("stop_s", 0.0)) for r in store.runs(sweep.sweep_id)}


def _sweep(root: Path, rule: dict[str, object]) -> tuple[list[dict[str, object]], dict[str, dict[str, float]]]:
    root.mkdir(parents=True)
    scenario = write_scenario(root / "scenario.yaml", [rule], gpus=4)
    text = scenario.read_text().replace("load_weights_s: 0.05", f"load_weights_s: {LOAD_S}")
    scenario.write_text(text)
    workdir = root / "work"
    hosts = write_hosts(root / "hosts.yaml", workdir, scenario, gpus=4)
    matrix = write_matrix(
        root / "matrix.yaml", name="stall", flags={"model-path": "/models/m", "tp-size": 1, "attention-backend": "fa3"},
        matrix={"mem-fraction-static": [0.7, 0.75, 0.8]}, stall={"model_load": f"{STALL_S:g}s"},
        deadlines={"model_load": "120s", "ready": "180s"}, probes={"settle_s": 0.1}, load="off",
    )  # fmt: skip
    stop = threading.Event()
    seen: dict[str, dict[str, float]] = {}
    watcher = threading.Thread(target=_watch, args=(workdir / "runs", stop, seen), daemon=True)
    watcher.start()
    try:
        done = orchestrator("sweep", str(matrix), "--hosts", str(hosts), "--json-out", str(root / "out.json"),
                            db=root / "store.db", timeout=300)  # fmt: skip
    finally:
        stop.set()
        watcher.join()
        reap(workdir)
    if done.returncode != 0:
        raise RuntimeError(f"sweep failed ({done.returncode}): {done.stdout}{done.stderr}")
    cells: list[dict[str, object]] = json.loads((root / "out.json").read_text())["cells"]
    for run_id, stop_s in _stop_s(root / "store.db").items():
        seen.setdefault(run_id, {})["stop_s"] = stop_s
    return cells, seen


def measure() -> dict[str, str]:
    """The figures, by name."""
    root = Path(tempfile.mkdtemp(prefix="orch-bench-stall-"))
    hang = {"at": "model_load", "kind": "hang", "after_progress": 0.5}
    hang_rule = {"when": {"attention-backend": "fa3"}, "fail": hang}
    hung, seen = _sweep(root / "hang", hang_rule)
    measured = [m for m in seen.values() if "gone" in m and "grew" in m]
    # The verdict is decided when the stop starts: the group's end, less the stop the sweep timed.
    ratios = [(m["gone"] - m.get("stop_s", 0.0) - m["grew"]) / STALL_S for m in measured]
    to_gone = max((m["gone"] - m["grew"]) / STALL_S for m in measured)
    cut = sum(c["category"] == "hang_or_timeout" and c["phase"] == "model_load" for c in hung)
    slow, _ = _sweep(root / "slow", {"when": {"attention-backend": "fa3"},
                                     "slow": {"at": "model_load", "factor": SLOW_FACTOR}})  # fmt: skip
    false_kills = sum(c["category"] == "hang_or_timeout" for c in slow)
    passed = sum(c["status"] == "pass" for c in slow)
    before = Deadlines().model_load / 60 * GPUS_OF_A_BIG_LAUNCH
    window = Stall().window("model_load") or 0.0
    after = window / 60 * GPUS_OF_A_BIG_LAUNCH
    return {
        "hang_detect_ratio": f"{max(ratios):.3f} (worst of {len(ratios)} hung cells; median "
        f"{sorted(ratios)[len(ratios) // 2]:.3f}; {cut}/{len(hung)} cut as hang_or_timeout at model_load; "
        f"stall window {STALL_S:g} s; goal <= 1.1; to the server's group gone, its stop included: {to_gone:.3f})",
        "slow_false_kills": f"{false_kills} ({passed}/{len(slow)} slow cells passed after a "
        f"{LOAD_S * SLOW_FACTOR:g} s load, {LOAD_S * SLOW_FACTOR / STALL_S:g}x the stall window; goal 0)",
        "hung_cell_gpu_minutes": f"before {before:.0f} (the model_load deadline, {Deadlines().model_load / 60:g} min), "
        f"after {after:.0f} (the model_load stall window, {window / 60:g} min after its last progress), for an "
        f"{GPUS_OF_A_BIG_LAUNCH}-GPU launch at the default settings",
    }


def main() -> int:
    """Measure and print."""
    for key, value in measure().items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
