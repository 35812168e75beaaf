"""`python -m sglang.launch_server <flags>` on the simulated host: the simulated server."""

import time

# As in orchestrator/sim/__main__.py: the simulated import phase counts from before the simulator's imports.
IMPORTS_BEGAN = time.monotonic()

import sys  # noqa: E402

from orchestrator.sim.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(imports_began=IMPORTS_BEGAN))
