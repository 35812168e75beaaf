"""The command line's own start: `orchestrator classify --json LOG` of one real log, median of 10 runs,
measured next to a bare interpreter start in the same run (the machine is shared and noisy)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOG = REPO.parent / "shared" / "fixtures" / "crash-logs" / "sglang-5491-eagle-flashinfer-illegal-memory-access.log"
RUNS = 10


def _median_wall(argv: list[str]) -> float:
    walls = []
    for _ in range(RUNS):
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        walls.append(time.perf_counter() - began)
    return statistics.median(walls)


def classify_one_log() -> dict[str, float]:
    """`classify_one_log_s` (goal <= 0.3) and the bare interpreter start it contains."""
    cli = str(Path(sys.executable).with_name("orchestrator"))
    bare = _median_wall([sys.executable, "-c", "pass"])
    ours = _median_wall([cli, "classify", "--json", str(LOG)])
    return {"classify_one_log_s": round(ours, 3), "interpreter_start_s": round(bare, 3),
            "classify_over_interpreter": round(ours / bare, 2)}


if __name__ == "__main__":
    for key, value in classify_one_log().items():
        print(f"{key}: {value}")
