"""`python -m orchestrator.sim --scenario FILE <SGLang flags>` starts a simulated SGLang server."""

import sys

from orchestrator.sim.cli import main
from orchestrator.sim.started import process_started

# A real SGLang's interpreter start and imports are part of its import phase: the simulated one lasts the
# scenario's import_s counted from this process's start, not import_s on top of the simulator's own start.
sys.exit(main(began=process_started()))
