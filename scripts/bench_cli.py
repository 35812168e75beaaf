"""The command line's own start, measured next to a bare interpreter start in the same run (the machine is shared
and noisy): `orchestrator classify --json LOG` of one real log and `orchestrator --help`, 10 runs each, printed as
the median with the min and max beside it."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOG = REPO.parent / "shared" / "fixtures" / "crash-logs" / "sglang-5491-eagle-flashinfer-illegal-memory-access.log"
RUNS = 10


def _walls(argv: list[str]) -> list[float]:
    walls = []
    for _ in range(RUNS):
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        walls.append(time.perf_counter() - began)
    return walls


def _spread(name: str, walls: list[float]) -> dict[str, float]:
    return {f"{name}_s": round(statistics.median(walls), 3), f"{name}_min_s": round(min(walls), 3),
            f"{name}_max_s": round(max(walls), 3)}  # fmt: skip


def cli_start() -> dict[str, float]:
    """`classify_one_log_s` and `cli_help_s` (goals <= 0.3 each), and the bare interpreter start both contain."""
    cli = str(Path(sys.executable).with_name("orchestrator"))
    bare = _walls([sys.executable, "-c", "pass"])
    classify = _walls([cli, "classify", "--json", str(LOG)])
    helped = _walls([cli, "--help"])
    ratio = round(statistics.median(classify) / statistics.median(bare), 2)
    spreads = _spread("classify_one_log", classify) | _spread("cli_help", helped) | _spread("interpreter_start", bare)
    return spreads | {"classify_over_interpreter": ratio}


if __name__ == "__main__":
    for key, value in cli_start().items():
        print(f"{key}: {value}")
