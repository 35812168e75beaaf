"""What preflight learns of a real-looking host over a loopback sshd, and what it refuses.

The host here is configured as a real one is (no `scenario:`, so the orchestrator treats it as real): its
launcher is an install's python, the simulated SGLang installed into a site folder the way pip lays out a wheel
(package, METADATA, RECORD), and its PATH decides whether there is an nvidia-smi (the simulated one) at all.

- No nvidia-smi, a failing one, fewer GPUs than `gpus:`, or a python without SGLang: the sweep is refused
  before anything runs, naming what is missing, what the host said and the fix; nothing is recorded and the
  host is left unlocked.
- A nightly wheel that keeps its version string is another build: the cells an earlier sweep proved
  unsupported are tried again on it, and skipped again on the same build.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from orchestrator.host.installs import SIM_BIN, SIM_SITE
from orchestrator.store import Store
from tests.paths import REPO
from tests.simhost import FAST_DEADLINES, orchestrator, processes_under, random_port_base
from tests.sshd_host import SshdHost

SCENARIO = REPO / "tests" / "data" / "adaptive" / "known-bad-scenario.yaml"
"""SGLang 0.5.9 whose fa3 DSA decode kernel has no build for the GPU (kernel_not_supported_on_arch)."""
MATRIX = """name: preflight-host
flags: {model-path: /models/known-bad, tp-size: 2, attention-backend: nsa, kv-cache-dtype: bf16}
matrix:
  nsa-decode-backend: [fa3, flashmla_kv]
probes:
  settle_s: 0
"""
PLAIN_PATH = "/usr/local/bin:/usr/bin:/bin"
DRIVER_GONE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running."
)


def install_sglang(root: Path, build: str) -> Path:
    """The simulated SGLang 0.5.9 installed as a wheel under `root` (its files marked with `build`); its python."""
    site = root / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(SIM_SITE / "sglang", site / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    server = site / "sglang" / "launch_server.py"
    server.write_text(server.read_text() + f"# build {build}\n")
    info = site / "sglang-0.5.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    lines = []
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        lines.append(f"{path.relative_to(site)},sha256={digest},{path.stat().st_size}")
    (info / "RECORD").write_text("\n".join([*lines, f"{info.name}/RECORD,,"]) + "\n")
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(
        f"#!/bin/sh\nPYTHONPATH={site}; export PYTHONPATH\nORCH_SIM_SCENARIO={SCENARIO}; export ORCH_SIM_SCENARIO\n"
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return python


def real_host(tmp: Path, sshd: SshdHost, interpreter: Path | str, path: str, **extra: Any) -> Path:
    """hosts.yaml with one host configured as a real one: `interpreter -m sglang.launch_server`, this PATH;
    `extra` adds or replaces keys of its entry."""
    entry: dict[str, Any] = {
        "ssh": f"{sshd.user}@127.0.0.1:{sshd.port}",
        "identity_file": str(sshd.client_key),
        "known_hosts": str(sshd.known_hosts),
        "launcher": f"{interpreter} -m sglang.launch_server",
        "gpus": 8,
        "workdir": str(tmp / "work"),
        "deadlines": FAST_DEADLINES,
        "port_base": random_port_base(),
        # Where the simulated nvidia-smi (when on PATH) and the simulated servers keep the GPUs' state.
        "env": {"PATH": path, "ORCH_SIM_GPU_STATE": str(tmp / "work" / "gpu-state"), "ORCH_SIM_GPUS": "8"},
        **extra,
    }
    hosts = tmp / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({"realhost": entry}, sort_keys=False))
    return hosts


def sweep(tmp: Path, hosts: Path, *extra: str) -> Any:
    matrix = tmp / "matrix.yaml"
    matrix.write_text(MATRIX)
    out = tmp / "out.json"
    out.unlink(missing_ok=True)
    args = ("sweep", str(matrix), "--host", "realhost", "--hosts", str(hosts), "--json-out", str(out), *extra)
    result = orchestrator(*args, db=tmp / "o.db", timeout=300)
    return result, (json.loads(out.read_text()) if out.exists() else None)


def assert_refused(tmp: Path, hosts: Path, *said: str) -> str:
    """The sweep is refused naming each of `said`; nothing launched or recorded; the host is not left locked."""
    for _ in range(2):  # a second try is refused for the same reason, not for a lock the first one left
        result, out = sweep(tmp, hosts)
        assert result.returncode == 1 and out is None, result.stdout[-2000:] + result.stderr[-2000:]
        text = " ".join(result.stderr.split())
        for words in said:
            assert words in text, text
        assert "Traceback" not in result.stderr and "Nothing was launched" in text
        assert "lock" not in text.lower(), text
    assert not (tmp / "work" / "runs").exists() or not any((tmp / "work" / "runs").iterdir())
    assert not (tmp / "o.db").exists() or Store(tmp / "o.db").list_sweeps() == []
    assert processes_under(tmp / "work") == []
    return text


def test_a_host_without_nvidia_smi_is_refused_naming_it(own_sshd: SshdHost, tmp_path: Path) -> None:
    python = install_sglang(tmp_path / "venv", "one")
    text = assert_refused(
        tmp_path,
        real_host(tmp_path, own_sshd, python, PLAIN_PATH),
        "host realhost cannot run SGLang launches: nvidia-smi is not installed or not on the PATH",
        "the host said: sh: 1: nvidia-smi: not found",
        "hosts.yaml: env: {PATH: ...}",
    )
    assert "SGLang" not in text.split("cannot run SGLang launches", 1)[1]  # the install itself is fine


def test_a_failing_nvidia_smi_is_refused_with_what_it_said(own_sshd: SshdHost, tmp_path: Path) -> None:
    fake = tmp_path / "driverless"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\necho {json.dumps(DRIVER_GONE)}\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    python = install_sglang(tmp_path / "venv", "one")
    assert_refused(
        tmp_path,
        real_host(tmp_path, own_sshd, python, f"{fake}:{PLAIN_PATH}"),
        "nvidia-smi failed (exit 9); the host said: NVIDIA-SMI has failed because it couldn't communicate",
        "reboot it or reload the driver",
    )


def test_fewer_gpus_than_hosts_yaml_gives_is_refused_with_the_fix(own_sshd: SshdHost, tmp_path: Path) -> None:
    python = install_sglang(tmp_path / "venv", "one")
    hosts = real_host(tmp_path, own_sshd, python, f"{SIM_BIN}:{PLAIN_PATH}")
    entry = yaml.safe_load(hosts.read_text())
    entry["realhost"]["env"]["ORCH_SIM_GPUS"] = "4"  # the machine has 4; hosts.yaml says 8
    hosts.write_text(yaml.safe_dump(entry, sort_keys=False))
    assert_refused(
        tmp_path,
        hosts,
        "host realhost cannot run SGLang launches: hosts.yaml gives host realhost gpus: 8, but nvidia-smi lists 4",
        "(fix: set gpus: 4 for host realhost in hosts.yaml)",
    )


def test_a_python_without_sglang_is_refused_naming_it(own_sshd: SshdHost, tmp_path: Path) -> None:
    # The orchestrator's own interpreter: a real python, with no sglang on its path.
    text = assert_refused(
        tmp_path,
        real_host(tmp_path, own_sshd, sys.executable, f"{SIM_BIN}:{PLAIN_PATH}"),
        f"{sys.executable} (the python of the host's launcher `{sys.executable} -m sglang.launch_server`) has no "
        "SGLang; the host said: No module named 'sglang'",
        "point launcher: of host realhost in hosts.yaml at the python of the environment SGLang is installed in",
    )
    assert "nvidia-smi" not in text  # the simulated one answers


def test_a_launcher_that_is_no_python_is_told_to_name_its_python(own_sshd: SshdHost, tmp_path: Path) -> None:
    # A wrapper script in front of SGLang (as a container's entry point is): its interpreter is `python:`.
    python = install_sglang(tmp_path / "venv", "one")
    wrapper = tmp_path / "venv" / "bin" / "start-sglang"
    wrapper.write_text(f'#!/bin/sh\nexec {python} -m sglang.launch_server "$@"\n')
    wrapper.chmod(0o755)
    plain = sys.executable  # a python without SGLang, standing for the host's system python3
    hosts = real_host(tmp_path, own_sshd, python, f"{SIM_BIN}:{PLAIN_PATH}", launcher=str(wrapper), python=plain)
    assert_refused(
        tmp_path, hosts,
        f"{plain} (the python of the host's launcher `{wrapper}`) has no SGLang; the host said: No module named",
        "or set python: of host realhost to that environment's interpreter",
    )  # fmt: skip
    fixed = real_host(tmp_path, own_sshd, python, f"{SIM_BIN}:{PLAIN_PATH}", launcher=str(wrapper), python=str(python))
    checked = orchestrator("validate", str(tmp_path / "matrix.yaml"), "--host", "realhost", "--hosts", str(fixed),
                           db=tmp_path / "o.db", timeout=120)  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert re.search(r"host realhost \(sglang 0\.5\.9, sglang-build [0-9a-f]{16}", checked.stdout), checked.stdout


def test_a_nightly_with_the_same_version_string_is_tried_again(own_sshd: SshdHost, tmp_path: Path) -> None:
    python = install_sglang(tmp_path / "venv", "nightly-1")
    hosts = real_host(tmp_path, own_sshd, python, f"{SIM_BIN}:{PLAIN_PATH}")

    def run(*extra: str) -> dict[str, dict[str, Any]]:
        result, out = sweep(tmp_path, hosts, *extra)
        assert result.returncode == 0 and out is not None, result.stdout[-3000:] + result.stderr[-3000:]
        return {c["flags"]["dsa-decode-backend"]: c for c in out["cells"]}

    first = run()
    assert first["fa3"]["category"] == "kernel_not_supported_on_arch" and first["flashmla_kv"]["status"] == "pass"
    store = Store(tmp_path / "o.db")
    build = store.list_sweeps()[0].versions["sglang-build"]
    assert store.list_sweeps()[0].versions["sglang"] == "0.5.9" and len(build) == 16

    same = run()
    assert same["fa3"]["status"] == "skipped" and same["fa3"]["reason"].startswith("known bad: sweep ")

    install_sglang(tmp_path / "venv", "nightly-2")  # tonight's wheel: still 0.5.9
    nightly = run()
    assert nightly["fa3"]["status"] == "fail" and nightly["fa3"]["category"] == "kernel_not_supported_on_arch"
    assert nightly["fa3"]["run_id"] not in {first["fa3"]["run_id"], same["fa3"].get("run_id")}
    newest = max(Store(tmp_path / "o.db").list_sweeps(), key=lambda s: s.started_at)
    assert newest.versions["sglang"] == "0.5.9" and newest.versions["sglang-build"] != build
    assert processes_under(tmp_path / "work") == []
