"""README's "Your first real host", run as written against a loopback sshd host.

The README's hosts.yaml entry is used as given except where it must point at this machine: its `ssh:` becomes the
loopback sshd (with that server's key and known_hosts), its launcher the simulated SGLang (8 simulated GPUs, the
scenario below), its workdir the test's. The matrix file and every command of the shell block run verbatim.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fault_harness import cli_env, our_processes
from tests.paths import REPO
from tests.simhost import random_port_base
from tests.sshd_host import SshdHost

pytestmark = [pytest.mark.ssh, pytest.mark.slow]

SCENARIO = {
    "version": "0.5.9",
    "gpus": 8,
    "timing": {"import_s": 0.02, "load_weights_s": 0.2, "memory_alloc_s": 0.02, "capture_cuda_graph_s": 0.05},
    "rules": [
        {"when": {"attention-backend": "triton", "kv-cache-dtype": "fp8_e4m3"},
         "fail": {"at": "memory_alloc", "kind": "unsupported_config"}},
        {"when": {"attention-backend": "flashinfer", "kv-cache-dtype": "fp8_e4m3"},
         "fail": {"at": "sampled_decode", "kind": "nan_in_probs"}},
    ],
}  # fmt: skip


def _blocks() -> tuple[dict[str, object], str, str]:
    """The section's hosts.yaml entry, its matrix file's text and its shell block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Your first real host", 1)[1].split("\n## ", 1)[0]
    yamls = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    shell = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert len(yamls) == 2 and shell, "the section holds a hosts.yaml block, a matrix block and a shell block"
    return yaml.safe_load(yamls[0]), yamls[1], shell.group(1)


def test_the_first_real_host_section_runs_as_written(tmp_path: Path, own_sshd: SshdHost) -> None:
    hosts_doc, matrix_text, commands = _blocks()
    ((name, entry),) = hosts_doc.items()
    assert isinstance(entry, dict)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    entry |= {
        "ssh": f"{own_sshd.user}@127.0.0.1:{own_sshd.port}", "identity_file": str(own_sshd.client_key),
        "known_hosts": str(own_sshd.known_hosts), "launcher": f"{sys.executable} -m orchestrator.sim",
        "python": sys.executable, "workdir": str(tmp_path / "host"), "scenario": str(scenario),
        "port_base": random_port_base(),
        "deadlines": {"model_load": "20s", "ready": "40s", "probe": "15s", "stop_grace": "2s"},
    }  # fmt: skip
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({name: entry}))
    work = tmp_path / "cwd"
    work.mkdir()
    matrix = re.search(r"orchestrator validate (\S+)", commands)
    assert matrix is not None
    (work / matrix.group(1)).write_text(matrix_text)
    env = cli_env() | {"ORCHESTRATOR_HOSTS": str(hosts), "ORCHESTRATOR_DB": str(work / "orchestrator.db"),
                       "ORCH_HF_TOKEN": "hf_first_night_secret", "PYTHONPATH": str(REPO)}  # fmt: skip
    outputs: list[str] = []
    try:
        for line in commands.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            assert words[0] == "orchestrator", line
            done = subprocess.run(
                [sys.executable, "-m", "orchestrator", *words[1:]], cwd=work, capture_output=True, text=True,
                timeout=300, env=env,
            )  # fmt: skip
            assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
            assert "Traceback" not in done.stdout + done.stderr, line
            outputs.append(done.stdout + done.stderr)
    finally:
        leftovers = our_processes(tmp_path)
    assert leftovers == [], leftovers
    validate, run, sweep, table, explain, _report, sweeps = outputs
    assert "4 cells" in validate
    assert "pass" in run and "simulated host" not in run.splitlines()[0]  # a real host's verdict, over SSH
    assert "4 cells: 2 pass, 2 fail" in sweep, sweep
    assert "unsupported_config" in table and "nan_in_probs" in table
    assert "kv-cache-dtype" in explain
    assert (work / "night.html").stat().st_size > 1000
    assert "first-night" in sweeps and "latest" in sweeps
    assert "hf_first_night_secret" not in "".join(outputs) + (work / "orchestrator.db").read_bytes().decode("latin-1")
