"""The host's disk full, or its run directories unwritable: `infra` with the reason, and on_infra decides the rest.

What is real and what is simulated: "disk full" is a real full filesystem (a small tmpfs mounted on the
host's `runs/` or workdir, then filled), skipped where this machine does not let us mount one;
"unwritable" is simulated by a plain file where the `runs/` directory should be (root may write
anywhere else). Sweeps run on the simulated host over the loopback sshd.
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.model import Status
from orchestrator.store.sqlite import Store
from orchestrator.sweep.cell_run import AttemptResult
from tests.fault_harness import EXPECTED, FaultHost, sweep_in_process
from tests.sshd_host import SshdHost

pytestmark = pytest.mark.ssh

FIRST = "attention-backend=flashinfer, kv-cache-dtype=bf16"


@contextlib.contextmanager
def tiny_tmpfs(path: Path, fh: FaultHost) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted on `path` (skips the test where mounting is not permitted)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here to fill up ({mounted.stderr.decode().strip()})")
    try:
        yield path
    finally:
        fh.reap()  # nothing of ours may keep the mount busy
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> None:
    """Write into `path` until its filesystem has no space left."""
    with open(path / "filler", "ab") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.fixture
def host(sshd: SshdHost, tmp_path: Path) -> Iterator[FaultHost]:
    """The fault host over the session's sshd."""
    fh = FaultHost(tmp_path, sshd=sshd)
    yield fh
    fh.reap()


def test_disk_full_mid_sweep_is_infra_with_the_reason_and_the_sweep_goes_on(host: FaultHost) -> None:
    with tiny_tmpfs(host.workdir / "runs", host) as runs:

        def on_result(result: AttemptResult) -> None:
            if result.cell.label == FIRST:
                fill(runs)

        sweep_in_process(host, packed=False, on_result=on_result)  # one at a time: the first runs, then it fills
        table = host.table()
        assert table[FIRST] == EXPECTED[FIRST]
        for label in set(EXPECTED) - {FIRST}:
            assert table[label][0] == "infra", (label, table[label])
        reasons = _reasons(host)
        assert all("No space left on device" in reasons[label] for label in set(EXPECTED) - {FIRST}), reasons
        assert host.launch_counts()["sim_launches"] == 1
        assert host.leftovers() == [] and host.gpu_holders() == []


def test_unwritable_run_dir_with_on_infra_stop_skips_the_rest_then_resume_runs_them(host: FaultHost) -> None:
    host.write_matrix(extra="on_infra: stop\n")
    runs = host.workdir / "runs"
    runs.write_text("a file where the run directories should be\n")
    stopped = host.cli("sweep", "--serial")
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "the sweep stopped after an infra failure (on_infra: stop); 3 cells skipped" in stopped.stderr
    table = host.table()
    assert table[FIRST][0] == "infra"
    reasons = _reasons(host)
    assert f"cannot write {runs}/r-" in reasons[FIRST] and "Not a directory" in reasons[FIRST], reasons
    for label in set(EXPECTED) - {FIRST}:
        assert table[label] == ("skipped", None, "unknown", "0/1"), table[label]
        assert "on_infra: stop" in reasons[label] and FIRST in reasons[label] and "Not a directory" in reasons[label]
    assert host.launch_counts()["sim_launches"] == 0

    runs.unlink()  # the host is fixed; the skipped cells run now, the infra one stands (no retries)
    sweep_id = stopped.stdout.rsplit("orchestrator table ", 1)[1].split()[0]
    resumed = host.cli("sweep", "--resume", sweep_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    table = host.table(sweep_id)
    assert table.pop(FIRST)[0] == "infra"
    assert table == {label: row for label, row in EXPECTED.items() if label != FIRST}
    assert host.leftovers() == [] and host.gpu_holders() == []


def test_full_disk_under_the_workdir_refuses_the_sweep_with_the_reason(sshd: SshdHost, tmp_path: Path) -> None:
    fh = FaultHost(tmp_path, sshd=sshd, env={"ORCH_SIM_GPU_STATE": str(tmp_path / "gpu-state")})
    with tiny_tmpfs(fh.workdir, fh):
        fill(fh.workdir)
        result = fh.cli("sweep")
        assert result.returncode == 1, result.stdout + result.stderr
        message = " ".join(result.stderr.split())
        assert f"cannot create the lock {fh.workdir}/lock" in message and "No space left on device" in message
        assert not (fh.workdir / "runs").exists() and fh.launch_counts()["sim_launches"] == 0


def _reasons(fh: FaultHost) -> dict[str, str]:
    with Store(fh.db) as store:
        sweep = store.latest_sweep()
        assert sweep is not None
        return {r.cell.label: r.reason for r in store.cell_results(sweep.sweep_id) if r.status is not Status.PASS}
