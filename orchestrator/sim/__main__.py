"""`python -m orchestrator.sim --scenario FILE <SGLang flags>` starts a simulated SGLang server."""

import sys

from orchestrator.sim.cli import main

sys.exit(main())
