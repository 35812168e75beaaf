"""`python -m orchestrator.sim --scenario FILE <SGLang flags>`: start one simulated SGLang server.

Reads ORCH_SIM_SCENARIO when --scenario is absent (neither: the shipped default, the demo's incident),
ORCH_SIM_GPU_STATE for the host's GPU state directory,
ORCH_SIM_GPUS for its GPU count (else the scenario's), CUDA_VISIBLE_DEVICES for the GPUs its ranks take,
ORCH_SIM_GRAMMARS to read grammars from elsewhere. `--host-facts` prints the simulated host's SGLang version
and packages as JSON instead of starting a server.
A bad scenario exits 2 before anything starts; bad SGLang flags exit 2 with the release's argparse error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from orchestrator.sim import gpu_state
from orchestrator.sim.argparser import build_parser, given_flags
from orchestrator.sim.errors import ConfigError
from orchestrator.sim.launch import prepare
from orchestrator.sim.logfmt import STDERR, LogWriter
from orchestrator.sim.releases import release_of
from orchestrator.sim.scenario import DEFAULT_SCENARIO, Scenario, load_scenario
from orchestrator.sim.server import SimServer

SCENARIO_ENV = "ORCH_SIM_SCENARIO"
PROG = "python -m orchestrator.sim"


def main(argv: list[str] | None = None, *, began: float | None = None) -> int:
    """Parse, load the scenario, start the server; returns the exit code. `began` (time.monotonic) is when
    the simulated import phase began (the process's start, sim/started.py); None: now."""
    pre = argparse.ArgumentParser(prog=PROG, add_help=False, allow_abbrev=False)
    pre.add_argument("--scenario", default=os.environ.get(SCENARIO_ENV))
    pre.add_argument("--host-facts", action="store_true")
    known, sglang_args = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    log = LogWriter()
    known.scenario = known.scenario or str(DEFAULT_SCENARIO)  # none given: the demo's incident, shipped
    try:
        scenario, grammar = load_scenario(known.scenario)
    except ConfigError as exc:
        log.raw(*(f"{PROG}: scenario error: {line}" for line in str(exc).splitlines()), fd=STDERR)
        return 2
    if known.host_facts:
        log.raw(json.dumps(host_facts(scenario)))
        return 0
    release = release_of(grammar)
    log.raw(*release.launcher_warning, fd=STDERR)
    namespace = build_parser(grammar).parse_args(sglang_args)
    log.info(*release.flag_deprecations(set(given_flags(grammar, namespace))))
    state = host_state(scenario)
    launch = prepare(
        scenario,
        grammar,
        namespace,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        gpus=gpu_state.gpus(state),
        holdings=gpu_state.holdings(state),
        launch_number=gpu_state.next_launch(state),
    )
    return SimServer(launch, state, began=began).run()


def host_state(scenario: Scenario) -> str:
    """The GPU state directory, described from the scenario unless whoever set it up already did.

    An ORCH_SIM_GPUS set by whoever prepared the host overrides the scenario's GPU count.
    """
    state = gpu_state.state_dir()
    gpu = scenario.gpu
    count = int(os.environ.get(gpu_state.GPUS_ENV) or scenario.gpus)
    gpu_state.write_config(
        state, gpus=count, name=gpu.name, memory_mib=gpu.memory_mib, compute_cap=gpu.compute_capability
    )
    return state


def host_facts(scenario: Scenario) -> dict[str, Any]:
    """What `--host-facts` prints: the release and packages the simulated host has installed."""
    gpu = scenario.gpu
    return {
        "sglang_version": scenario.version,
        "packages": {"sglang": scenario.version, **scenario.packages},
        "gpu_name": gpu.name,
        "compute_capability": gpu.compute_capability,
        "gpus": str(scenario.gpus),
    }
