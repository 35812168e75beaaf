"""Slurm without a cluster: command lines and output parsing, the job script, hosts.yaml, the store's new columns."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.errors import ConfigError, ConfigErrors, LaunchError
from orchestrator.host.launcher import LaunchSpec
from orchestrator.slurm.commands import (
    Submission,
    job_name,
    killed_reason,
    parse_sbatch,
    parse_scontrol,
    parse_squeue,
    secrets_stdin,
    squeue_command,
)
from orchestrator.slurm.script import parse_placement, render_job_sh
from orchestrator.store import Store
from orchestrator.store.schema import _DDL
from orchestrator.transport.base import CommandResult
from tests.paths import REPO


def done(out: str = "", err: str = "", code: int = 0) -> CommandResult:
    return CommandResult(code, out.encode(), err.encode())


def test_sbatch_reply_is_the_job_id_or_slurms_message() -> None:
    assert parse_sbatch(done("1234\n")) == "1234"
    assert parse_sbatch(done("77;cluster-a\n")) == "77"
    message = (
        "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    refused = done(err=message, code=1)
    with pytest.raises(LaunchError, match="Invalid partition name specified"):
        parse_sbatch(refused)
    with pytest.raises(LaunchError, match="Slurm refused"):
        parse_sbatch(done("Submitted batch job 5\n"))  # not --parsable output: never guessed at


def test_squeue_lines_and_a_queue_that_forgot_every_id() -> None:
    jobs = parse_squeue(done("12|RUNNING|node07|None|orch-r-1\n13|PENDING||Resources|orch-r-2\n"))
    assert jobs["12"].node == "node07" and jobs["12"].active and not jobs["12"].waiting
    assert jobs["13"].waiting and jobs["13"].node is None and jobs["13"].reason == "Resources"
    assert parse_squeue(done(err="slurm_load_jobs error: Invalid job id specified", code=1)) == {}
    with pytest.raises(LaunchError):
        parse_squeue(done(err="slurm_load_jobs error: Unable to contact slurm controller", code=1))
    assert "-j 12,13" in squeue_command(["13", "12"])


def test_scontrol_end_states_and_exit_codes() -> None:
    line = ("JobId=9 JobName=orch-r-abc UserId=root(0) JobState=CANCELLED Reason=None ExitCode=0:15 "
            "NodeList=localhost BatchHost=localhost")  # fmt: skip
    info = parse_scontrol("9", done(line))
    assert info is not None
    assert (info.state, info.reason, info.node, info.exit_code) == ("CANCELLED", None, "localhost", 143)
    failed = parse_scontrol("9", done("JobId=9 JobState=FAILED Reason=NonZeroExitCode ExitCode=2:0 NodeList=n1"))
    assert failed is not None and failed.exit_code == 2
    assert parse_scontrol("9", done(err="Invalid job id specified", code=1)) is None
    timeout = parse_scontrol("9", done("JobId=9 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:0 NodeList=n1"))
    assert timeout is not None
    assert killed_reason(timeout) == "Slurm job 9 on n1 reached its time limit (JobState=TIMEOUT, Reason=TimeLimit)"


def test_sbatch_line_quotes_every_value_and_carries_secrets_only_on_stdin(tmp_path: Path) -> None:
    run = "/shared/runs/r 1"
    sub = Submission(script=f"{run}/job.sh", run_dir=run, log_path=f"{run}/server.log", name=job_name("r-1"),
                     gpus=2, partition="gpu; rm -rf /", account="team", time="1:00:00",
                     extra=("--constraint=b200",))  # fmt: skip
    command = sub.command()
    fake = tmp_path / "sbatch"  # prints its arguments and the secret that reached its environment
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"; echo "token=$HF_TOKEN"\n')
    fake.chmod(0o755)
    out = subprocess.run(["sh", "-c", command], input=secrets_stdin({"HF_TOKEN": "s3 cret"}), capture_output=True,
                         timeout=30, env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    args = out.stdout.decode().splitlines()
    assert args[:4] == ["--parsable", "--job-name", "orch-r-1", "--output"]
    assert "gpu; rm -rf /" in args and "--gres=gpu:2" in args and "--constraint=b200" in args
    assert args[-2:] == ["/shared/runs/r 1/job.sh", "token=s3 cret"]
    assert "s3 cret" not in command


def test_job_script_picks_a_reserved_port_and_writes_its_placement(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    argv = (sys.executable, "-c", "import sys; print(' '.join(sys.argv[1:]))", "--tp-size", "2",
            "--host", "127.0.0.1", "--port", "0")  # fmt: skip
    spec = LaunchSpec(run_id="r-1", argv=argv, env={"CUDA_VISIBLE_DEVICES": "", "A": "b c"}, secret_names=(),
                      gpus=(), port=0, run_dir=str(run_dir), gpu_count=2)  # fmt: skip
    script = render_job_sh(spec, [41000, 42100, 43200])
    assert "CUDA_VISIBLE_DEVICES=" not in script  # Slurm's own, for the GPUs it gave the job
    (run_dir / "job.sh").write_text(script)
    env = {**os.environ, "SLURM_JOB_ID": "4", "CUDA_VISIBLE_DEVICES": "2,3", "TMPDIR": str(tmp_path)}
    out = subprocess.run(["bash", str(run_dir / "job.sh")], capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    placed = parse_placement((run_dir / "placement").read_text())
    assert placed is not None
    _, port, gpus = placed
    assert out.stdout == f"--tp-size 2 --host 0.0.0.0 --port {port}\n"
    assert port in (41000, 42100, 43200) and gpus == (2, 3)
    # The port stays reserved while the pid that became the server lives: that one exited, so it is free again.
    reservations = tmp_path / f"orchestrator-ports-{os.getuid()}"
    assert (reservations / str(port)).exists()
    again = subprocess.run(["bash", str(run_dir / "job.sh")], capture_output=True, text=True, timeout=30, env=env)
    assert again.stdout == out.stdout


def test_the_job_script_refuses_a_command_without_host_and_port(tmp_path: Path) -> None:
    spec = LaunchSpec(run_id="r-1", argv=("python", "-m", "x"), env={}, secret_names=(), gpus=(), port=0,
                      run_dir=str(tmp_path))  # fmt: skip
    with pytest.raises(LaunchError):
        render_job_sh(spec, [41000])


SLURM_HOST = """cluster:
  transport: slurm
  ssh: me@login-node
  slurm:
    partition: gpu
    qos: high
    sbatch_args: [--exclusive]
  workdir: /shared/orch
  gpus: 4
"""


def errors_of(text: str, tmp_path: Path) -> list[ConfigError]:
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_hosts(path)
    return err.value.errors if isinstance(err.value, ConfigErrors) else [err.value]


def test_a_slurm_host_loads_with_its_login_node(tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text(SLURM_HOST)
    host = load_hosts(tmp_path / "hosts.yaml")["cluster"]
    assert (host.transport, host.host, host.user, host.gpus) == ("slurm", "login-node", "me", 4)
    assert host.slurm is not None
    assert (host.slurm.partition, host.slurm.qos, host.slurm.sbatch_args) == ("gpu", "high", ("--exclusive",))
    assert host.to_dict()["slurm"]["sbatch_args"] == ["--exclusive"]


def test_slurm_host_mistakes_name_the_line_and_the_fix(tmp_path: Path) -> None:
    typo = errors_of(SLURM_HOST.replace("    qos: high", "    qoss: high"), tmp_path)
    assert [(e.line, e.fix) for e in typo] == [(6, "did you mean 'qos'?")]
    missing = errors_of("c:\n  transport: slurm\n  workdir: /x\n", tmp_path)
    assert missing[0].line == 2 and "slurm: {partition: gpu}" in (missing[0].fix or "")
    stray = errors_of("c:\n  transport: local\n  slurm: {partition: gpu}\n", tmp_path)
    assert stray[0].line == 3 and "transport: slurm" in (stray[0].fix or "")
    no_login = errors_of("c:\n  transport: slurm\n  slurm: {partition: gpu}\n  identity_file: ~/.ssh/k\n", tmp_path)
    assert no_login[0].line == 4 and "ssh" in (no_login[0].fix or "")


def test_the_commented_slurm_example_is_valid(tmp_path: Path) -> None:
    lines = (REPO / "configs" / "hosts.yaml").read_text().splitlines()
    start = lines.index("# cluster:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(re.sub(r"^# ?", "", line))
    (tmp_path / "hosts.yaml").write_text("\n".join(block) + "\n")
    host = load_hosts(tmp_path / "hosts.yaml")["cluster"]
    assert host.transport == "slurm" and host.slurm is not None and host.slurm.time == "2:00:00"


def test_a_store_written_before_job_ids_gains_the_columns(tmp_path: Path) -> None:
    old_ddl = _DDL.replace("    job_id     TEXT,\n    node       TEXT,\n", "")
    assert "job_id" not in old_ddl
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.executescript(old_ddl + "INSERT INTO schema_version VALUES (1);")
    conn.close()
    with Store(tmp_path / "old.db") as store:
        assert store.list_sweeps() == []
    columns = {row[1] for row in sqlite3.connect(tmp_path / "old.db").execute("PRAGMA table_info(runs)")}
    assert {"job_id", "node"} <= columns
