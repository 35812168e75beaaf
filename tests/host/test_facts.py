"""Host facts that say what a host lacks or which build it runs: nvidia-smi's failures told apart from an empty
answer, and an install's identity read by its own python from a wheel's RECORD, a checkout's files and commit."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.host.facts import (
    GpuProcess,
    NoGpuReading,
    gpu_query_problem,
    install_identity_command,
    parse_install_identity,
    parse_version,
    read_gpu_processes,
    sglang_version_command,
)

DRIVER_GONE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.\n"
)
"""What nvidia-smi prints (exit 9) when its driver is not loaded, as on a host after a driver upgrade."""


def test_an_empty_answer_of_a_working_nvidia_smi_is_a_reading() -> None:
    assert gpu_query_problem(0, "", "") is None
    assert read_gpu_processes(0, "") == []
    assert read_gpu_processes(0, "4242, GPU-abc, 70000\n") == [GpuProcess(4242, "GPU-abc", 70000)]


@pytest.mark.parametrize(
    ("exit_code", "stdout", "stderr", "names", "fix"),
    [
        (127, "", "sh: 1: nvidia-smi: not found\n", "not installed or not on the PATH", "env: {PATH: ...}"),
        (127, "", "bash: line 1: nvidia-smi: command not found\n", "sh: line 1: nvidia-smi", "PATH"),
        (9, DRIVER_GONE, "", "couldn't communicate with the NVIDIA driver", "reboot"),
        (6, "No devices were found\n", "", "No devices were found", "CUDA_VISIBLE_DEVICES"),
        (15, "Unable to determine the device handle for GPU0000:18:00.0: GPU is lost.\n", "", "GPU is lost", "reboot"),
        (255, "", "Segmentation fault\n", "exit 255", "run nvidia-smi on the host"),
        # Some drivers print their failure and still exit 0: the words decide.
        (0, DRIVER_GONE, "", "NVIDIA-SMI has failed", "driver"),
    ],
)
def test_a_failed_or_missing_nvidia_smi_is_no_reading(
    exit_code: int, stdout: str, stderr: str, names: str, fix: str
) -> None:
    problem = gpu_query_problem(exit_code, stdout, stderr)
    assert problem is not None and names in problem and fix in problem.split("(fix: ", 1)[1], problem
    with pytest.raises(NoGpuReading) as raised:
        read_gpu_processes(exit_code, stdout, stderr)
    assert raised.value.problem == problem


def _record_line(site: Path, path: Path) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(site)},sha256={digest},{path.stat().st_size}"


def install_wheel(site: Path, version: str, source: str, direct_url: dict[str, object] | None = None) -> None:
    """An SGLang wheel installed into `site` as pip lays it out: the package, METADATA and a RECORD of its files."""
    package, info = site / "sglang", site / f"sglang-{version}.dist-info"
    package.mkdir(parents=True, exist_ok=True)
    info.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    lines = [_record_line(site, p) for p in sorted(site.rglob("*")) if p.is_file() and p.name != "RECORD"]
    (info / "RECORD").write_text("\n".join([*lines, f"{info.name}/RECORD,,"]) + "\n")


def identity_of(site: Path | None, python: str = sys.executable) -> tuple[int, str, str]:
    env = (
        {**os.environ, "PYTHONPATH": str(site)} if site else {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    )
    done = subprocess.run(
        ["sh", "-c", install_identity_command(python)], capture_output=True, text=True, timeout=60, env=env
    )
    return done.returncode, done.stdout, done.stderr


def version_of(site: Path) -> str | None:
    command = f"PYTHONPATH={site} " + sglang_version_command(sys.executable)
    return parse_version(subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60).stdout)


def test_a_nightly_wheel_with_the_same_version_string_is_another_build(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_wheel(site, "0.5.9", "x = 1\n")
    first = parse_install_identity(*identity_of(site))
    assert first.missing is None and first.build and len(first.build) == 16
    assert first.location == str((site / "sglang").resolve())
    # The same wheel installed again (new files, new times, same contents): the same build.
    for path in site.rglob("*.py"):
        os.utime(path, (1, 1))
    assert parse_install_identity(*identity_of(site)).build == first.build
    # Tonight's nightly: the version string unchanged, one file different.
    install_wheel(site, "0.5.9", "x = 2\n")
    second = parse_install_identity(*identity_of(site))
    assert version_of(site) == "0.5.9"
    assert second.build and second.build != first.build


def test_the_commit_of_a_wheel_built_from_git_is_named(tmp_path: Path) -> None:
    site = tmp_path / "site"
    commit = "29b7f22d8c0ffee0123456789abcdef012345678"
    install_wheel(site, "0.5.9", "", {"url": "https://github.com/sgl-project/sglang", "vcs_info": {"vcs": "git",
                  "commit_id": commit}})  # fmt: skip
    assert parse_install_identity(*identity_of(site)).commit == commit
    # setuptools-scm's _version.py of a nightly wheel names its commit too.
    other = tmp_path / "other"
    install_wheel(other, "0.0.0.dev9596+g29b7f22d8", "")
    (other / "sglang" / "_version.py").write_text("__commit_id__ = commit_id = 'g29b7f22d8'\n")
    assert parse_install_identity(*identity_of(other)).commit == "29b7f22d8"


def test_a_checkout_is_its_files_and_its_git_commit(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    package = repo / "python" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.5.9"\n')
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{commit} refs/heads/main\n")
    first = parse_install_identity(*identity_of(package.parent))
    assert first.commit == commit and first.build
    (package / "server_args.py").write_text("# a local edit\n")
    assert parse_install_identity(*identity_of(package.parent)).build != first.build


def test_a_python_without_sglang_says_so() -> None:
    missing = parse_install_identity(*identity_of(None))
    assert missing.missing == "No module named 'sglang'" and missing.build is None
    gone = parse_install_identity(*identity_of(None, "/opt/nowhere/bin/python"))
    assert gone.missing is not None and gone.missing.startswith("the python did not run (exit 127)")
    assert "/opt/nowhere/bin/python" in gone.missing


def test_an_answer_that_is_not_the_script_s_says_nothing() -> None:
    assert parse_install_identity(0, "Python 3.11\n") == parse_install_identity(0, "")
    assert parse_install_identity(0, "").build is None and parse_install_identity(0, "").missing is None
    said = parse_install_identity(1, "", "ImportError: libcudart.so.12: cannot open shared object file\n")
    assert said.missing is not None and "libcudart.so.12" in said.missing


def test_the_host_s_words_reach_a_message_without_control_sequences() -> None:
    # A crafted nvidia-smi (or a python's error) could clear the screen or retitle the terminal.
    problem = gpu_query_problem(9, "\x1b[2J\x1b]0;owned\x07ALL TESTS PASSED\x9b", "")
    assert problem is not None and "\x1b" not in problem and "\x07" not in problem and "\x9b" not in problem
    assert "\\x1b[2J\\x1b]0;owned\\x07ALL TESTS PASSED\\x9b" in problem
    said = parse_install_identity(3, json.dumps({"missing": "No module named '\x1b[31msglang'"}))
    assert said.missing == "No module named '\\x1b[31msglang'"
