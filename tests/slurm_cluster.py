"""A real single-node Slurm cluster on loopback for the tests (the measured recipe in shared/reference/slurm.md).

munged, `slurmctld -i` and `slurmd` run with their config, state, logs, munge key and socket in one temp
dir and on two free ports, so nothing under /etc is read and nothing else on the machine is disturbed.
The node has 8 fake GPUs: gres files that are symlinks to /dev/null. Daemons are stopped by the pids
their pid files name, never by name; the jobs first, with scancel.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
GPUS = 8

SLURM_CONF = """ClusterName=orchtest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/run/munge.socket
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={d}/state/ctld
SlurmdSpoolDir={d}/state/d
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
MinJobAge=300
KillWait=2
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 \
RealMemory=16000 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=gpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""

GRES_CONF = """AutoDetect=off
NodeName=localhost Name=gpu File={d}/dev/nvidia[0-{last}]
"""


def missing_tools() -> list[str]:
    """The Slurm and munge programs this machine lacks."""
    return [t for t in (*DAEMONS, "sbatch", "squeue", "scontrol", "scancel", "sinfo") if shutil.which(t) is None]


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    """munged + slurmctld + slurmd under `root`, started and stopped by pid."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a Slurm client (sbatch, squeue, the orchestrator) needs in its environment."""
        return {"SLURM_CONF": str(self.conf)}

    def client(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, env={**os.environ, **self.env}
        )

    def start(self) -> SlurmCluster:
        """Write the config, start the three daemons and wait for the node to be idle."""
        d = self.root
        for sub in ("etc", "run", "log", "state/ctld", "state/d", "munge", "dev"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        for i in range(GPUS):
            dev = d / "dev" / f"nvidia{i}"
            if not dev.is_symlink():
                dev.symlink_to("/dev/null")
        ctld_port, d_port = _free_ports(2)
        self.conf.write_text(SLURM_CONF.format(d=d, ctld_port=ctld_port, d_port=d_port, gpus=GPUS))
        (d / "etc" / "gres.conf").write_text(GRES_CONF.format(d=d, last=GPUS - 1))
        key = d / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        env = {**os.environ, **self.env}
        try:
            subprocess.run(
                ["munged", "--force", f"--key-file={key}", f"--socket={d}/run/munge.socket",
                 f"--pid-file={d}/run/munged.pid", f"--log-file={d}/log/munged.log",
                 f"--seed-file={d}/munge/munge.seed"],
                check=True, env=env, capture_output=True, timeout=30,
            )  # fmt: skip
            subprocess.run(["slurmctld", "-i"], check=True, env=env, capture_output=True, timeout=30)
            subprocess.run(["slurmd", "-N", "localhost"], check=True, env=env, capture_output=True, timeout=30)
            self._wait_idle(ctld_port)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_idle(self, ctld_port: int) -> None:
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            # sinfo blocks ~9 s when slurmctld does not listen yet: ask only once the port answers.
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", ctld_port), timeout=0.5):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    state = self.client("sinfo", "-h", "-o", "%T", timeout=5).stdout.strip()
                if state == "idle":
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the test Slurm node never became idle (last state {state!r}):\n{self.logs()}")

    def jobs(self) -> list[str]:
        """`JOBID STATE NAME` of every job in the queue."""
        out = self.client("squeue", "-h", "-o", "%i %T %j").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def logs(self) -> str:
        """The daemons' log tails, for a failure message."""
        parts = []
        for name in ("slurmctld", "slurmd", "munged"):
            path = self.root / "log" / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}.log\n" + "\n".join(path.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(parts)

    def _pid(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.root / "run" / f"{name}.pid").read_text().strip())
        return None

    def stop(self) -> None:
        """Cancel every job, then end the daemons by the pids their pid files hold (SIGKILL after 10 s)."""
        if self._pid("slurmctld") is not None:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                self.client("scancel", "--user", str(os.getuid()), timeout=10)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self._pid(name)
            if pid is None or pid <= 1:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + 10
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
            (self.root / "run" / f"{name}.pid").unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
