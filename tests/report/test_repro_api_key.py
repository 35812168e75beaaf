"""`repro --script` of a run whose server demands `--api-key` (issue 33, broken 4).

The run passed; its script must pass too: every request (curl's readiness poll and the embedded probes)
carries `Authorization: Bearer <key>`, read from the variable the run used, never from a command line.
The script names the variables it needs and refuses to start without them. On the simulated host,
which (as SGLang does) answers 401 to a request without the key.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.model import Status
from orchestrator.store import Store
from tests.cli.test_compare import SIM_059, invoke, sim_host, sweep

KEY = 'sk-repro "quoted" back\\slash $HOME 9f3a'
"""A key a shell or a config file could mangle: quotes, a backslash, a dollar, spaces."""
VAR = "ORCH_REPRO_KEY_TEST"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One passing cell on the simulated host, launched with `--api-key` from a variable."""
    tmp = tmp_path_factory.mktemp("repro-key")
    hosts = tmp / "hosts.yaml"
    hosts.write_text(sim_host("simk", tmp / "work", f"  scenario: {SIM_059}\n"))
    (tmp / "m.yaml").write_text(
        "name: repro-key\nhost: simk\n"
        f"flags: {{model-path: /models/m, tp-size: 1, kv-cache-dtype: bf16, api-key: {{secret: {VAR}}}}}\n"
        "matrix: {fp8-gemm-backend: [cutlass]}\nprobes: {settle_s: 0.2, concurrent_requests: 2}\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(VAR, KEY)
        sweep_id = sweep(tmp / "o.db", hosts, tmp / "m.yaml")
    yield tmp / "o.db", sweep_id


def _script(db: Path, sweep_id: str) -> str:
    with Store(db, create=False) as store:
        (run,) = store.runs(sweep_id)
    assert run.verdict is not None and run.verdict.status is Status.PASS
    result = invoke(["repro", run.run_id, "--script", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


def _bash(script: str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in (VAR, "PORT", "REPRO_API_KEY")}
    return subprocess.run(
        ["bash", "-c", script], env={**environ, "TMPDIR": str(tmp), **env}, capture_output=True, text=True, timeout=90
    )


def _command_lines_until(done: threading.Event, seen: list[bytes]) -> None:
    """Every process's command line, read again and again until `done`."""
    while not done.is_set():
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                seen.append(cmdline.read_bytes())
        time.sleep(0.05)


def test_the_script_of_a_passing_run_with_a_key_passes_and_names_its_variable(
    swept: tuple[Path, str], tmp_path: Path
) -> None:
    db, sweep_id = swept
    script = _script(db, sweep_id)
    assert KEY not in script and KEY.encode() not in db.read_bytes()
    assert f"Secrets it reads (export them first): {VAR} (--api-key, sent as Authorization: Bearer)" in script

    done, seen = threading.Event(), list[bytes]()
    watcher = threading.Thread(target=_command_lines_until, args=(done, seen))
    watcher.start()
    try:
        result = _bash(script, tmp_path, **{VAR: KEY})
    finally:
        done.set()
        watcher.join()

    assert result.returncode == 0, result.stdout + result.stderr
    assert "probe sampled:" in result.stdout and "repro: no failure" in result.stdout
    assert "401" not in result.stdout
    # Only the server's own command line holds the key (that is how SGLang takes it, as in the sweep);
    # neither curl nor the probe ever had it as an argument.
    holders = [c for c in seen if KEY.encode() in c]
    assert any(b"--api-key" in c for c in holders)  # the server's, so the watcher did see command lines
    assert not any(b"curl" in c.split(b"\0")[0] or b"\0-\0http" in c for c in holders)


def test_a_wrong_key_is_refused_by_the_server_so_the_key_is_what_passes(
    swept: tuple[Path, str], tmp_path: Path
) -> None:
    db, sweep_id = swept
    script = _script(db, sweep_id)
    # The server is launched with the variable's value; the probes send the same value: to see that they
    # send it at all, launch the server with the key and make the probes' copy differ.
    wrong = script.replace(f'REPRO_API_KEY="${{{VAR}}}"', 'REPRO_API_KEY="not-the-key"')
    assert wrong != script
    result = _bash(wrong, tmp_path, **{VAR: KEY})
    assert result.returncode in (1, 3), result.stdout + result.stderr
    assert "NOT READY" in result.stdout or re.search(r"HTTP 401", result.stdout)


def test_the_script_refuses_to_start_without_the_key_naming_its_variable(
    swept: tuple[Path, str], tmp_path: Path
) -> None:
    db, sweep_id = swept
    result = _bash(_script(db, sweep_id), tmp_path)
    assert result.returncode == 2
    assert f"{VAR} must be set" in result.stderr
    assert list(tmp_path.iterdir()) == []
