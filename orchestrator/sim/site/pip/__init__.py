"""The simulated host's `pip`: only `python -m pip list --format=freeze`, answered from the scenario."""
