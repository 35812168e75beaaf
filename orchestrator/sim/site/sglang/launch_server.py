"""`python -m sglang.launch_server <flags>` on the simulated host: the simulated server."""

import sys

from orchestrator.sim.cli import main
from orchestrator.sim.started import process_started

if __name__ == "__main__":
    # As in orchestrator/sim/__main__.py: the simulated import phase counts from this process's start.
    sys.exit(main(began=process_started()))
