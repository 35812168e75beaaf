"""`python -m orchestrator` runs the command line."""

from orchestrator.cli import main

main()
