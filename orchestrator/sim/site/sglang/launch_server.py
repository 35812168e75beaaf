"""`python -m sglang.launch_server <flags>` on the simulated host: the simulated server."""

import sys

from orchestrator.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
