"""`python -m orchestrator.sim --scenario FILE <SGLang flags>` starts a simulated SGLang server."""

import time

# Before the simulator's own imports: a real SGLang's imports are part of its import phase, so the simulated one
# lasts the scenario's import_s counted from here, not import_s on top of this interpreter's imports.
IMPORTS_BEGAN = time.monotonic()

import sys  # noqa: E402

from orchestrator.sim.cli import main  # noqa: E402

sys.exit(main(imports_began=IMPORTS_BEGAN))
