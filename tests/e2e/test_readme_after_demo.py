"""README's "After the demo": in a fresh copy of the repository, `scripts/demo`, then the README's commands as written.

The copy holds the tracked files only (no store, no venv). Its `.venv` is a real virtual environment
whose dependencies come from this checkout's (pip would need the network) and whose `orchestrator` is
the copy's own code; the stamp that says "installed" is set, so `scripts/demo` skips pip, as it does
on a second run. The only other difference from a user's shell: the simulated host's working
directory is private to the test (through $ORCHESTRATOR_HOSTS), so parallel sessions never share it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fault_harness import our_processes
from tests.paths import REPO

pytestmark = pytest.mark.slow

ENTRY_POINT = """#!{python}
import sys
from orchestrator.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""


def readme_block() -> str:
    """The shell block under README's "## After the demo" heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## After the demo", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "README.md has no ```sh block under ## After the demo"
    return match.group(1)


def fresh_copy(root: Path) -> Path:
    """The tracked files of this checkout, as a clone would have them, and a venv that needs no network."""
    clone = root / "clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "00-clone.pth").write_text(f"{clone}\n")
    deps = sysconfig.get_paths()["purelib"]
    (site / "zz-deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    entry = venv / "bin" / "orchestrator"
    entry.write_text(ENTRY_POINT.format(python=venv / "bin" / "python"))
    entry.chmod(0o755)
    (venv / ".installed-base").touch()
    return clone


def private_sim_hosts(clone: Path, root: Path) -> Path:
    """The clone's hosts.yaml with the simulated host's workdir moved into the test's folder."""
    text = (clone / "configs" / "hosts.yaml").read_text()
    text = text.replace("workdir: /tmp/orchestrator-sim", f"workdir: {root / 'sim-work'}")
    text = text.replace("scenario: sim/", f"scenario: {clone / 'configs' / 'sim'}/")
    assert str(root / "sim-work") in text
    hosts = root / "hosts.yaml"
    hosts.write_text(text)
    return hosts


def test_the_readme_commands_after_the_demo_work_as_written(tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("ORCHESTRATOR_DB", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env["ORCHESTRATOR_HOSTS"] = str(private_sim_hosts(clone, tmp_path))
    env["COLUMNS"] = "120"
    assert shutil.which("orchestrator", path=env["PATH"]) is None  # a fresh shell: not on PATH yet

    demo = subprocess.run(["scripts/demo"], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    sweep_id = re.search(r"sweep (s-\d{8}-\d{6}-[0-9a-f]{4}) started", demo.stdout)
    assert sweep_id, demo.stdout[-3000:]
    assert "30 cells: 7 pass, 23 fail" in demo.stdout
    assert (clone / "orchestrator.db").is_file()

    script = "set -eu\n" + readme_block()
    after = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    out = after.stdout + after.stderr
    assert after.returncode == 0, out[-4000:]
    assert "Traceback" not in out and not re.search(r"^error: ", out, re.MULTILINE), out[-4000:]
    # Both tables are the demo's sweep, the second one after the repro too.
    assert out.count(f"glm5-nvfp4-sm120 · {sweep_id.group(1)} on sim") == 2, out[-4000:]
    assert "nan_in_probs" in out and "30 cells: 7 pass, 23 fail" in out
    assert "repro exit 1 (1: the failure reproduced)" in out
    assert (clone / "night.html").stat().st_size > 10_000
    bug = (clone / "bug.md").read_text()
    assert "nan_in_probs" in bug and "probability tensor contains" in bug
    assert (clone / "repro.sh").read_text().startswith("#!")
    assert our_processes(tmp_path) == []  # no server of the demo or the repro outlived its command
