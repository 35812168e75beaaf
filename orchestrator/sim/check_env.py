"""`python -m orchestrator.sim.check_env --scenario FILE`: the simulated host's `python -m sglang.check_env`.

Prints the `Key: value` lines SGLang's check_env prints (reference/sglang-facts.md section 5): Python, CUDA,
the GPUs, PyTorch, then every package the scenario says is installed, in check_env's underscore spelling.
"""

from __future__ import annotations

import argparse
import sys

from orchestrator.sim import gpu_state
from orchestrator.sim.cli import host_state
from orchestrator.sim.errors import ConfigError
from orchestrator.sim.scenario import Scenario, load_scenario

DRIVER_VERSION = "580.95.05"


def report(scenario: Scenario, gpus: list[gpu_state.Gpu]) -> list[str]:
    """The check_env lines for a scenario on a host with `gpus`."""
    indices = ",".join(str(gpu.index) for gpu in gpus)
    name = gpus[0].name if gpus else scenario.gpu.name
    cap = gpus[0].compute_cap if gpus else scenario.gpu.compute_capability
    packages = dict(scenario.packages)
    lines = [
        f"Python: {sys.version.splitlines()[0]}",
        f"CUDA available: {bool(gpus)}",
        f"GPU {indices}: {name}",
        f"GPU {indices} Compute Capability: {cap}",
        "CUDA_HOME: /usr/local/cuda",
        f"CUDA Driver Version: {DRIVER_VERSION}",
        f"PyTorch: {packages.pop('torch', 'Module Not Found')}",
        f"sglang: {packages.pop('sglang', scenario.version)}",
    ]
    lines += [f"{package.replace('-', '_')}: {version}" for package, version in sorted(packages.items())]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 2 on a bad scenario."""
    parser = argparse.ArgumentParser(prog="python -m orchestrator.sim.check_env")
    parser.add_argument("--scenario", required=True)
    args = parser.parse_args(argv)
    try:
        scenario, _ = load_scenario(args.scenario)
    except ConfigError as exc:
        print(f"scenario error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report(scenario, gpu_state.gpus(host_state(scenario)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
