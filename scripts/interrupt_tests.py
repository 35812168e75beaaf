"""Interrupt pytest at random moments and check that no process of the interrupted run is left.

A subset of the suite that starts simulated servers (locally and over the loopback sshd) and the sshd itself
runs under pytest; after a random delay the run is interrupted: SIGINT to its process group (a user's Ctrl-C),
or SIGTERM to pytest alone (`kill PID`, a CI timeout). When pytest has exited, every process of that run is
looked for by two independent means: the run's mark in a process's initial environment (tests/procs.py) and a
working directory under the run's --basetemp (every launch starts in its run directory there). A SIGKILLed run
cannot clean up; the script checks that the next run's start reaps what it left.

Usage: scripts/interrupt_tests [--runs 5] [--seed N] [--min-s 3] [--max-s 25] [--sigkill 2]
Prints one line per interruption and a summary; exit 1 if any process was left.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import procs  # noqa: E402  (the repository root is put on the path just above)

SUBSET = ["tests/e2e/test_run_ssh.py", "tests/e2e/test_secret_flag.py", "tests/sim/test_server.py"]


def left_behind(mark: str, basetemp: Path) -> list[str]:
    """Processes of the interrupted run still alive: by mark, or by working directory under its basetemp."""
    found = {pid: "mark" for pid in procs.marked_processes(mark)}
    root = str(basetemp.resolve())
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in found:
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if (cwd == root or cwd.startswith(root + "/")) and procs.start_time(int(entry)) is not None:
                found[int(entry)] = "cwd"
    out = []
    for pid, how in sorted(found.items()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append(f"{pid} ({how}): {cmd[:160]}")
    return out


def one_run(sig: signal.Signals, delay: float, registry: Path) -> tuple[str, int, list[str], float]:
    """Start pytest on the subset, signal it after `delay` s; (mark, pytest exit code, processes left, exit wait)."""
    basetemp = Path(tempfile.mkdtemp(prefix="interrupt-tests-"))
    env = {**os.environ, "ORCH_TEST_PROCS_DIR": str(registry)}
    env.pop(procs.MARK_ENV, None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}/t", *SUBSET]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    mark = f"{proc.pid}.{procs.start_time(proc.pid)}"
    time.sleep(delay)
    signalled = time.monotonic()
    if proc.poll() is None:
        if sig is signal.SIGINT:
            os.killpg(proc.pid, sig)  # a terminal's Ctrl-C reaches the whole foreground group
        else:
            proc.send_signal(sig)
    try:
        code = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    waited = time.monotonic() - signalled
    time.sleep(0.5)  # a process that was being ended is given a moment to go
    left = left_behind(mark, basetemp)
    if sig is signal.SIGKILL:
        before = len(left)
        # The next run's start reaps it: a run that only collects tests is enough.
        collect = [sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", "tests/test_layers.py"]
        subprocess.run(collect, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        left = left_behind(mark, basetemp)
        left = [f"(SIGKILL left {before}; after the next run's start:)", *left] if left else []
        if not left:
            print(f"    SIGKILL left {before} processes; the next run's start reaped them all")
    shutil.rmtree(basetemp, ignore_errors=True)
    return mark, code, left, waited


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="interruptions per signal (SIGINT, SIGTERM)")
    parser.add_argument("--sigkill", type=int, default=2, help="SIGKILLed runs, reaped by the next run")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--min-s", type=float, default=3.0)
    parser.add_argument("--max-s", type=float, default=25.0)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    registry = Path(tempfile.mkdtemp(prefix="interrupt-tests-registry-"))
    plan = [signal.SIGINT] * args.runs + [signal.SIGTERM] * args.runs + [signal.SIGKILL] * args.sigkill
    print(f"seed {seed}: {len(plan)} interrupted runs of {' '.join(SUBSET)}")
    failures = 0
    for sig in plan:
        delay = rng.uniform(args.min_s, args.max_s)
        _, code, left, waited = one_run(sig, delay, registry)
        status = "clean" if not left else f"{len(left)} LEFT"
        print(f"  {sig.name:<7} after {delay:5.1f}s: pytest exit {code:>4}, gone {waited:4.1f}s later; {status}")
        for line in left:
            print(f"      {line}")
        failures += bool(left)
    shutil.rmtree(registry, ignore_errors=True)
    print(f"{len(plan) - failures}/{len(plan)} interrupted runs left no process behind")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
