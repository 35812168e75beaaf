"""Kill -9 the orchestrator at seeded random moments of a sweep, `--resume` each one, and check what is left.

An uninterrupted sweep of a five-cell matrix (a pass, three different failures and a cell that hangs
at model_load, packed onto four simulated GPUs) gives the table to match and the span over which the
kills are spread. Then, for each seed, on a host of its own: start the same sweep, SIGKILL the
orchestrator at a random moment of that span, run `orchestrator sweep --resume`, and print one line:
the kill time and what was in flight, the resume's exit code, whether `orchestrator table --format json`
equals the uninterrupted one, and what is left (our processes by `ps`, GPUs held per the sim's
nvidia-smi, launches the store has no run for). Exits 1 if any point fails.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault_kill import expected_table, kill_and_resume, kill_host, uninterrupted
from tests.sshd_host import SshdHost, login_user, missing_tools


def main() -> int:
    """Run the baseline and every kill point; print one line each and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20, help="kill points (seeds 1..N)")
    parser.add_argument("--ssh", action="store_true", help="reach the simulated host through a loopback sshd")
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs (stores, run dirs) for a look")
    args = parser.parse_args()
    if args.ssh and missing_tools():
        parser.error(f"--ssh needs {', '.join(missing_tools())}")
    root = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    sshd = SshdHost(login_user()).start() if args.ssh else None
    started = time.monotonic()
    failures = 0
    try:
        base = kill_host(root / "uninterrupted", sshd)
        try:
            baseline = uninterrupted(base)
            stray = base.leftovers() + base.gpu_holders()
        finally:
            base.reap()
        print(
            f"uninterrupted sweep: {baseline.span_s:.2f}s after it was recorded; {len(baseline.table)} cells; "
            f"as the scenario dictates: {baseline.table == expected_table()}; leftovers {len(stray)}",
            flush=True,
        )
        for seed in range(1, args.points + 1):
            host = kill_host(root / f"seed-{seed}", sshd)
            try:
                point = kill_and_resume(host, seed, baseline)
            finally:
                host.reap()
            print(point.line(), flush=True)
            if not point.ok:
                failures += 1
                for what in (*point.leftovers, *point.unrecorded):
                    print(f"    {what}")
                if not point.equal:
                    for label, row in sorted(point.table.items()):
                        if baseline.table.get(label) != row:
                            print(f"    {label}: {row} != {baseline.table.get(label)}")
                if point.resume_rc != 0:
                    print("    " + point.resume_output[-1500:].replace("\n", "\n    "))
    finally:
        if sshd is not None:
            sshd.cleanup()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.points - failures}/{args.points} points resumed to the uninterrupted table with nothing left "
        f"behind ({time.monotonic() - started:.0f}s){'' if not args.keep else f'; files in {root}'}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
