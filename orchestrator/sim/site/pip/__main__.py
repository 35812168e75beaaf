"""`python -m pip list --format=freeze` on a simulated install: the scenario's release and packages, as pip prints."""

import os
import sys

from orchestrator.sim.scenario import DEFAULT_SCENARIO, load_scenario

args = [a for a in sys.argv[1:] if a != "--disable-pip-version-check"]
if args[:1] != ["list"] or "--format=freeze" not in args:
    sys.exit("the simulated host's pip answers only: pip list --format=freeze")
scenario = load_scenario(os.environ.get("ORCH_SIM_SCENARIO") or DEFAULT_SCENARIO)[0]
for name, version in {"sglang": scenario.version, **scenario.packages}.items():
    print(f"{name}=={version}")
