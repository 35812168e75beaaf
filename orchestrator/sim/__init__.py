"""A simulated SGLang host: a real server process with SGLang's flags, logs, HTTP API and failures.

`python -m orchestrator.sim --scenario FILE <SGLang flags>` starts one (cli.py); the scenario file
(scenario.py) names the release it imitates and the rules that make launches warn, fail, hang or answer
wrongly. `bin/nvidia-smi` and `python -m orchestrator.sim.hold_gpu` show and occupy its simulated GPUs.
"""
