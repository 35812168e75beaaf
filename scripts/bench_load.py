"""The speed load (issue 37): what it costs the orchestrator itself, per passing cell.

One sweep on the simulated host (local transport) of CELLS passing cells, each measured with the matrix's
default load (32 requests, concurrency 8, 256 tokens in, 128 out, 3 repeats) on a server that serves
TOK_S output tokens/s (fa3 FAST_FACTOR times that). From each run's stored speed:
- `load_overhead_s`: the load's own time outside its requests (choosing the model, building prompts, the
  thread pool, checking answers, summing up), per passing cell: the worst, and the median; with the share of
  the load's whole time it is. The requests' own time is the server's, not ours.
- `load_fastest_named`: whether `table --best` names the cell the scenario makes fastest.

Run alone: `.venv/bin/python scripts/bench_load.py` (scripts/bench runs it too).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_env  # noqa: F401  (importing it puts the repository on sys.path)
import yaml

from orchestrator.settings import LoadSettings
from tests.faults_support import reap, write_hosts, write_matrix, write_scenario
from tests.simhost import orchestrator

TOK_S = 4000
FAST_FACTOR = 1.5
CELLS = ("fa3", "triton", "flashinfer", "torch_native")


def _sweep(root: Path) -> tuple[list[dict[str, Any]], str]:
    scenario = write_scenario(root / "scenario.yaml", [], gpus=4)
    perf = {"tok_s": TOK_S, "noise": 0.02, "rules": [{"when": {"attention-backend": "fa3"}, "factor": FAST_FACTOR}]}
    scenario.write_text(yaml.safe_dump({**yaml.safe_load(scenario.read_text()), "perf": perf}))
    workdir = root / "work"
    hosts = write_hosts(root / "hosts.yaml", workdir, scenario, gpus=4)
    matrix = write_matrix(
        root / "matrix.yaml", name="load", flags={"model-path": "/models/m", "tp-size": 1},
        matrix={"attention-backend": list(CELLS)}, probes={"settle_s": 0.1}, deadlines={"probe": "60s"},
        load=LoadSettings().to_dict(),  # write_matrix turns the load off unless given one: the default, spelled out
    )  # fmt: skip
    db = root / "store.db"
    try:
        done = orchestrator("sweep", str(matrix), "--hosts", str(hosts), "--serial", "--json-out",
                            str(root / "out.json"), db=db, timeout=600)  # fmt: skip
    finally:
        reap(workdir)
    if done.returncode != 0:
        raise RuntimeError(f"sweep failed ({done.returncode}): {done.stdout}{done.stderr}")
    best = orchestrator("table", "--best", "-f", "json", db=db, timeout=60)
    named = json.loads(best.stdout)["best"]
    cells: list[dict[str, Any]] = json.loads((root / "out.json").read_text())["cells"]
    return cells, str(named["label"]) if named else "none"


def measure() -> dict[str, str]:
    """The figures, by name."""
    cells, best = _sweep(Path(tempfile.mkdtemp(prefix="orch-bench-load-")))
    speeds = [c["speed"] for c in cells if isinstance(c.get("speed"), dict)]
    valid = [s for s in speeds if s.get("valid")]
    overheads = [float(s["overhead_s"]) for s in speeds]
    requests_s = [sum(float(r["span_s"]) for r in s["repeats"]) for s in valid]
    shares = [o / (o + r) for o, r in zip([float(s["overhead_s"]) for s in valid], requests_s, strict=True)]
    medians = ", ".join(f"{c['label']}: {s['output_tok_s']['median']:.0f}" for c in cells
                        if isinstance(s := c.get("speed"), dict) and s.get("valid"))  # fmt: skip
    return {
        "load_overhead_s": f"{max(overheads):.4f} worst, {statistics.median(overheads):.4f} median per passing cell "
        f"({len(valid)}/{len(cells)} cells measured; the requests themselves {statistics.median(requests_s):.2f} s; "
        f"overhead at most {max(shares):.2%} of the load's time; default load: 32 requests, concurrency 8, 256 in, "
        f"128 out, 3 repeats; simulated server {TOK_S} tok/s, fa3 x{FAST_FACTOR:g}; output tok/s {medians})",
        "load_fastest_named": f"{best.endswith('attention-backend=fa3')} (table --best named {best!r})",
    }


def main() -> int:
    """Measure and print."""
    for key, value in measure().items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
