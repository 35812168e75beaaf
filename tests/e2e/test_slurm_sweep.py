"""Sweeps on a real Slurm cluster (slurmctld + slurmd + munged on loopback, 8 fake GPUs as gres), with the
simulated SGLang host as each job's command: verdicts, job ids, packing by Slurm, outside cancels, refusals,
and an orchestrator SIGKILLed mid-sweep and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import Store
from tests.e2e.test_demo_sweep import expected
from tests.paths import REPO
from tests.simhost import FAST_DEADLINES, orchestrator, processes_under, write_hosts
from tests.slurm_cluster import SlurmCluster
from tests.sshd_host import SshdHost

SCENARIO = """version: 0.5.9
gpus: 8
timing: {{load_weights_s: {load}}}
rules:
  - when: {{attention-backend: triton}}
    fail: {{at: memory_alloc, kind: unsupported_config}}
  - when: {{attention-backend: fa3, kv-cache-dtype: fp8_e4m3}}
    fail: {{at: sampled_decode, kind: nan_in_probs}}
"""

SLOW_LOAD_DEADLINES = {**FAST_DEADLINES, "model_load": "30s", "ready": "60s"}
"""The scenarios below load for seconds on purpose (to be cancelled or killed meanwhile)."""

TP2_MATRIX = """name: tp2
flags: {{model-path: /models/m, tp-size: 2}}
matrix:
  attention-backend: [flashinfer, triton, fa3, torch_native]
  kv-cache-dtype: [auto, fp8_e4m3]
retries: {retries}
"""


def slurm_hosts(tmp: Path, *, scenario: Path | None = None, partition: str = "gpu", **extra: Any) -> Path:
    """hosts.yaml with `simhost`: a Slurm host (sbatch run locally) whose jobs run the simulated SGLang."""
    kwargs: dict[str, Any] = {"scenario": scenario} if scenario else {}
    return write_hosts(
        tmp / "hosts.yaml", tmp / "work", transport="slurm", slurm={"partition": partition, "time": "10:00"},
        launcher=f"{sys.executable} -m orchestrator.sim", deadlines=SLOW_LOAD_DEADLINES, **kwargs, **extra,
    )  # fmt: skip


def tp2_verdict(flags: dict[str, Any]) -> tuple[str, str, str]:
    """What SCENARIO makes of a TP2 cell (the plain simulated host agrees: see the TP2 test)."""
    if flags["attention-backend"] == "triton":
        return "fail", "memory_alloc", "unsupported_config"
    if flags["attention-backend"] == "fa3" and flags["kv-cache-dtype"] == "fp8_e4m3":
        return "fail", "sampled_decode", "nan_in_probs"
    return "pass", "after_decode", "healthy"


def tp2_files(tmp: Path, *, load: float = 2.0, retries: int = 0) -> tuple[Path, Path]:
    """The TP2 matrix (8 cells, 4 fit on 8 GPUs at once) and its scenario."""
    scenario = tmp / "scenario.yaml"
    scenario.write_text(SCENARIO.format(load=load))
    matrix = tmp / "tp2.yaml"
    matrix.write_text(TP2_MATRIX.format(retries=retries))
    return matrix, scenario


def sweep(
    matrix: Path, hosts: Path, db: Path, cluster: SlurmCluster, *extra: str, timeout: float = 600
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = db.parent / f"{db.stem}.json"
    result = orchestrator(
        "sweep", str(matrix), "--host", "simhost", "--hosts", str(hosts), "--json-out", str(out), *extra,
        db=db, timeout=timeout, env=job_env(cluster, db.parent),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + cluster.logs()
    return result, json.loads(out.read_text())


def sweep_in_background(
    matrix: Path, hosts: Path, db: Path, cluster: SlurmCluster, *, stderr: int
) -> subprocess.Popen[bytes]:
    """`orchestrator sweep` as a child process the test signals or kills while its jobs run."""
    env = {**os.environ, "ORCHESTRATOR_DB": str(db), "COLUMNS": "200", **job_env(cluster, db.parent)}
    args = [sys.executable, "-m", "orchestrator", "sweep", str(matrix), "--host", "simhost", "--hosts", str(hosts)]
    return subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)


def wait_running(cluster: SlurmCluster, count: int, within: float = 120) -> None:
    """Until `count` jobs are RUNNING at once; the test fails after `within` seconds."""
    deadline = time.monotonic() + within
    while len(cluster.client("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"not {count} jobs running within {within:.0f} s: {cluster.jobs()}")
        time.sleep(0.2)


def job_env(cluster: SlurmCluster, tmp: Path) -> dict[str, str]:
    """The CLI's environment, which its jobs inherit: the cluster's config, and a TMPDIR of the test's own
    (the jobs' port reservations go there, not into the machine's /tmp)."""
    (tmp / "tmp").mkdir(exist_ok=True)
    return {**cluster.env, "TMPDIR": str(tmp / "tmp")}


def verdicts(table: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["cell_id"]: (c["status"], c["phase"], c["category"]) for c in table["cells"]}


def our_jobs(cluster: SlurmCluster, db: Path) -> dict[str, list[str]]:
    """run id -> the ids of every Slurm job named after it (scontrol keeps ended jobs for MinJobAge)."""
    with Store(db) as store:
        run_ids = {r.run_id for s in store.list_sweeps() for r in store.runs(s.sweep_id)}
    out = cluster.client("scontrol", "show", "job", "-o").stdout
    jobs: dict[str, list[str]] = {}
    for line in out.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        name = fields.get("JobName", "")
        if name.startswith("orch-") and name[5:] in run_ids:
            jobs.setdefault(name[5:], []).append(fields["JobId"])
    return jobs


class RunningCounter:
    """Polls squeue in the background: the most jobs seen RUNNING at once, and the first job seen running."""

    def __init__(self, cluster: SlurmCluster):
        self.cluster = cluster
        self.most = 0
        self.most_queued = 0
        """Jobs in the queue at once, in any state."""
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            rows = [line.split() for line in self.cluster.client("squeue", "-h", "-o", "%i %T").stdout.splitlines()]
            running = [job for job, state in rows if state == "RUNNING"]
            self.most = max(self.most, len(running))
            self.most_queued = max(self.most_queued, len(rows))
            self.seen += [j for j in running if j not in self.seen]
            time.sleep(0.2)

    def __enter__(self) -> RunningCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_demo_matrix_on_slurm_gets_the_simulated_hosts_verdicts(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path)
    _, table = sweep(REPO / "configs" / "glm5-nvfp4-sm120.yaml", hosts, tmp_path / "demo.db", slurm_cluster)
    assert len(table["cells"]) == 30
    wrong = [(c["flags"], c["status"], c["phase"], c["category"]) for c in table["cells"]
             if (c["status"], c["phase"], c["category"]) != expected(c["flags"])]  # fmt: skip
    assert wrong == []
    assert all(c["job_id"] for c in table["cells"]), [c for c in table["cells"] if not c["job_id"]]
    jobs = our_jobs(slurm_cluster, tmp_path / "demo.db")
    with Store(tmp_path / "demo.db") as store:
        runs = [r for s in store.list_sweeps() for r in store.runs(s.sweep_id)]
    # One job per run (retries are runs of their own), each recorded with its run.
    assert sorted(jobs) == sorted(r.run_id for r in runs)
    assert all(jobs[r.run_id] == [r.job_id] for r in runs)
    unplaced = [(r.run_id, r.node, r.port, r.timings) for r in runs
                if not (r.node == "localhost" and r.port and r.timings.get("pending_s") is not None)]  # fmt: skip
    assert unplaced == []
    assert slurm_cluster.jobs() == []
    assert processes_under(tmp_path / "work") == []


def test_tp2_matrix_runs_four_jobs_at_once_with_the_plain_hosts_verdicts(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    matrix, scenario = tp2_files(tmp_path, load=2.0)
    with RunningCounter(slurm_cluster) as counter:
        _, table = sweep(matrix, slurm_hosts(tmp_path, scenario=scenario), tmp_path / "slurm.db", slurm_cluster)
    assert counter.most == 4, counter.most  # 8 GPUs, 2 per job: Slurm runs 4, queues the rest
    assert counter.most_queued == 8, counter.most_queued  # every cell submitted ahead
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain_hosts = write_hosts(
        plain_dir / "hosts.yaml", plain_dir / "work", scenario=scenario, deadlines=SLOW_LOAD_DEADLINES
    )
    plain = orchestrator(
        "sweep", str(matrix), "--host", "simhost", "--hosts", str(plain_hosts), "--json-out",
        str(plain_dir / "t.json"), db=plain_dir / "plain.db", timeout=600,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    plain_table = json.loads((plain_dir / "t.json").read_text())
    assert verdicts(table) == verdicts(plain_table)
    assert all((c["status"], c["phase"], c["category"]) == tp2_verdict(c["flags"]) for c in table["cells"])
    assert {v[0] for v in verdicts(table).values()} == {"pass", "fail"}
    assert all(c["job_id"] for c in table["cells"])
    # Queue time is not launch time: the jobs that waited for GPUs say so apart from ready_s.
    assert max(c["pending_s"] for c in table["cells"]) > 1.0
    assert max(c["ready_s"] or 0 for c in table["cells"]) < 15
    assert slurm_cluster.jobs() == []


def test_max_queued_bounds_the_jobs_submitted_ahead(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    matrix, scenario = tp2_files(tmp_path, load=1.0)
    with RunningCounter(slurm_cluster) as counter:
        _, table = sweep(matrix, slurm_hosts(tmp_path, scenario=scenario), tmp_path / "q.db", slurm_cluster,
                         "--max-queued", "2")  # fmt: skip
    assert counter.most_queued == 2 and counter.most == 2, (counter.most_queued, counter.most)
    assert all((c["status"], c["phase"], c["category"]) == tp2_verdict(c["flags"]) for c in table["cells"])
    assert slurm_cluster.jobs() == []


def test_a_job_cancelled_from_outside_is_an_infra_verdict_naming_slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    matrix, scenario = tp2_files(tmp_path, load=6.0)
    hosts = slurm_hosts(tmp_path, scenario=scenario)
    cancelled: list[str] = []

    def cancel_first_running() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = slurm_cluster.client("squeue", "-h", "-t", "RUNNING", "-o", "%i|%j").stdout.split()
            if running:
                job_id, _ = running[0].split("|")
                time.sleep(1.0)  # the server is loading its weights
                slurm_cluster.client("scancel", job_id)
                cancelled.append(job_id)
                return
            time.sleep(0.2)

    canceller = threading.Thread(target=cancel_first_running, daemon=True)
    canceller.start()
    _, table = sweep(matrix, hosts, tmp_path / "c.db", slurm_cluster)
    canceller.join(5)
    assert len(cancelled) == 1
    hit = [c for c in table["cells"] if c["job_id"] == cancelled[0]]
    assert len(hit) == 1, table["cells"]
    cell = hit[0]
    assert (cell["status"], cell["category"]) == ("infra", "process_killed"), cell
    assert f"Slurm job {cancelled[0]}" in cell["reason"] and "JobState=CANCELLED" in cell["reason"], cell["reason"]
    others = [c for c in table["cells"] if c is not cell]
    wrong = [c for c in others if (c["status"], c["phase"], c["category"]) != tp2_verdict(c["flags"])]
    assert not wrong, [{k: c.get(k) for k in ("flags", "status", "phase", "category", "reason")} for c in wrong]
    assert slurm_cluster.jobs() == []


def test_a_job_slurm_refuses_is_infra_with_slurms_message(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    matrix, scenario = tp2_files(tmp_path, load=0.5)
    hosts = slurm_hosts(tmp_path, scenario=scenario, partition="no-such-partition")
    _, table = sweep(matrix, hosts, tmp_path / "r.db", slurm_cluster)
    assert {c["status"] for c in table["cells"]} == {"infra"}
    assert all("Invalid partition name specified" in c["reason"] for c in table["cells"]), table["cells"][0]
    assert all(c["job_id"] is None for c in table["cells"])
    assert slurm_cluster.jobs() == []


def test_sigkilled_orchestrator_resumes_onto_its_running_jobs(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    matrix, scenario = tp2_files(tmp_path, load=5.0)
    hosts = slurm_hosts(tmp_path, scenario=scenario)
    db = tmp_path / "k.db"
    proc = sweep_in_background(matrix, hosts, db, slurm_cluster, stderr=subprocess.DEVNULL)
    try:
        wait_running(slurm_cluster, 2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    queued_at_kill = {line.split()[0] for line in slurm_cluster.jobs()}
    assert len(queued_at_kill) >= 2  # the jobs outlived the orchestrator
    with Store(db) as store:
        sweep_id = store.list_sweeps()[-1].sweep_id
    _, table = sweep(matrix, hosts, db, slurm_cluster, "--resume", sweep_id)
    for cell in table["cells"]:
        assert (cell["status"], cell["phase"], cell["category"]) == tp2_verdict(cell["flags"]), cell
    jobs = our_jobs(slurm_cluster, db)
    with Store(db) as store:
        runs = store.runs(sweep_id)
    # No run was submitted twice, and every job still queued at the kill was followed to its cell's verdict.
    assert all(len(ids) == 1 for ids in jobs.values()), jobs
    by_job = {r.job_id: r for r in runs if r.job_id}
    for job_id in queued_at_kill:
        assert by_job[job_id].state == "done", by_job[job_id]
    done = [r for r in runs if r.state == "done"]
    assert sorted(r.cell_id for r in done) == sorted(c["cell_id"] for c in table["cells"])
    assert slurm_cluster.jobs() == []
    left = processes_under(tmp_path / "work")
    assert left == [], subprocess.run(["ps", "-eo", "pid,ppid,pgid,etimes,args"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_orchestrator_cancels_its_jobs_and_resume_finishes(
    slurm_cluster: SlurmCluster, tmp_path: Path, sig: signal.Signals
) -> None:
    matrix, scenario = tp2_files(tmp_path, load=5.0)
    hosts = slurm_hosts(tmp_path, scenario=scenario)
    db = tmp_path / "i.db"
    proc = sweep_in_background(matrix, hosts, db, slurm_cluster, stderr=subprocess.PIPE)
    try:
        wait_running(slurm_cluster, 2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode != 0
    assert slurm_cluster.jobs() == [], err.decode()[-2000:]  # every job it submitted, running or queued, is gone
    with Store(db) as store:
        sweep_id = store.list_sweeps()[-1].sweep_id
        interrupted = [r for r in store.runs(sweep_id) if r.state != "done"]
    assert interrupted, "the interrupted attempts are left for resume, not given a verdict"
    _, table = sweep(matrix, hosts, db, slurm_cluster, "--resume", sweep_id)
    assert all((c["status"], c["phase"], c["category"]) == tp2_verdict(c["flags"]) for c in table["cells"])
    assert slurm_cluster.jobs() == []
    assert processes_under(tmp_path / "work") == []


def test_through_an_ssh_login_node(slurm_cluster: SlurmCluster, sshd: SshdHost, tmp_path: Path) -> None:
    """sbatch, squeue and scancel over SSH; the probes to the job's node through the login node's SSH channel."""
    matrix, scenario = tp2_files(tmp_path, load=0.5)
    hosts = write_hosts(
        tmp_path / "hosts.yaml", tmp_path / "work", scenario=scenario, sshd=sshd, transport="slurm",
        slurm={"partition": "gpu"}, deadlines=SLOW_LOAD_DEADLINES,
        env={**slurm_cluster.env, "TMPDIR": str(tmp_path)},  # the login shell has no SLURM_CONF of its own
    )  # fmt: skip
    db = tmp_path / "ssh.db"
    out = tmp_path / "ssh.json"
    result = orchestrator(
        "sweep", str(matrix), "--host", "simhost", "--hosts", str(hosts), "--json-out", str(out), db=db, timeout=600,
        env={"SLURM_CONF": "/nonexistent"},  # nothing of Slurm may run on this side
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = json.loads(out.read_text())
    assert all((c["status"], c["phase"], c["category"]) == tp2_verdict(c["flags"]) for c in table["cells"])
    assert all(c["job_id"] for c in table["cells"])
    assert slurm_cluster.jobs() == []
