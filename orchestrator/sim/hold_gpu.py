"""A foreign process holding simulated GPUs: `python -m orchestrator.sim.hold_gpu --gpus 0,1 [--seconds N]`.

Stands in for somebody else's job left on the host, so tests can check that GPUs in use are noticed.
It holds until --seconds pass or it gets SIGTERM/SIGINT (then it lets go); SIGKILL also frees them,
because readers of the state directory ignore dead holders.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from orchestrator.sim import gpu_state


def main(argv: list[str] | None = None) -> int:
    """Hold the GPUs, print one line saying so, wait, let go."""
    parser = argparse.ArgumentParser(prog="python -m orchestrator.sim.hold_gpu")
    parser.add_argument("--gpus", required=True, help="comma-separated GPU indices, e.g. 0,1")
    parser.add_argument("--seconds", type=float, default=None, help="let go after this long (default: never)")
    parser.add_argument("--memory-mib", type=int, default=70000, help="memory held on each GPU")
    args = parser.parse_args(argv)
    try:
        indices = [int(part) for part in args.gpus.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--gpus: not a list of integers: {args.gpus!r}")
    state = gpu_state.state_dir()
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    gpu_state.hold(state, {index: args.memory_mib for index in indices}, name="python")
    print(f"holding GPUs {','.join(map(str, indices))} ({args.memory_mib} MiB each) in {state}", flush=True)
    try:
        done.wait(args.seconds)
    finally:
        gpu_state.release(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
