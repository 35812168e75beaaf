"""The simulated host's `sglang` package: `import sglang; sglang.__version__` is the scenario's release.

Only on the path of a simulated install's python (orchestrator/host/installs.py), which names the scenario in
ORCH_SIM_SCENARIO; `python -m sglang.launch_server` is the simulated server.
"""

from __future__ import annotations

import os
from typing import Any


def __getattr__(name: str) -> Any:
    # Read lazily: `python -m sglang.launch_server` imports this package first and may name its scenario itself.
    if name == "__version__":
        from orchestrator.sim.scenario import DEFAULT_SCENARIO, load_scenario

        return load_scenario(os.environ.get("ORCH_SIM_SCENARIO") or DEFAULT_SCENARIO)[0].version
    raise AttributeError(name)
