"""Shell injection: hostile text in flag values, flag names, environment values, model paths and sweep names.

Every payload would create a canary file if any shell evaluated it. None may: the canary must never
appear, and the server must receive each value exactly as written (its `server_args=ServerArgs(...)`
log line prints every option with repr(), so the literal is checked byte for byte). Invalid flag names
never reach a shell: the config loader or preflight (with SGLang's own argparse message) rejects them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.model import Cell, Phase, Status
from orchestrator.store.sqlite import Store
from orchestrator.sweep.engine import SweepHooks
from tests.faults_support import (
    cli,
    reap,
    run_sweep,
    server_environs,
    write_hosts,
    write_matrix,
    write_scenario,
)
from tests.sshd_host import SshdHost


def payloads(canary: Path) -> list[str]:
    """Text that runs `touch CANARY` if any shell evaluates it, unquoted or badly quoted."""
    c = str(canary)
    return [
        f"$(touch {c})",
        f"`touch {c}`",
        f"; touch {c}",
        f"&& touch {c}",
        f"|| touch {c}",
        f"| touch {c}",
        f"& touch {c} &",
        f"' ; touch {c} ; '",
        f'" ; touch {c} ; "',
        f"x\ntouch {c}",
        f"x\rtouch {c}\r",
        f"$((1+1))$(touch {c})",
        f";${{IFS}}touch${{IFS}}{c}",
        f"> {c}",
        f"$(echo dG91Y2gK | base64 -d) {c}",
        f"\\$(touch {c})\\",
        f"'\\''$(touch {c})'\\''",
        f'"$(touch {c})"',
        f"$'\\x74ouch' {c}",
        f"{c}* /tmp/* ? [a-z]",
        "--trust-remote-code",
        "-v",
        "--port=1",
        f"模型-ünï-😀-‮rtl $(touch {c})",
        "%s%n%x %(name)s",
        "{} {0} {model-path} ${HOME} ~root !!",
        "[/] [bold]markup[/bold] \\",
        f"x # $(touch {c})",
        f"$(touch {c}) 2>&1 <<EOF",
    ]


def _served(log: str) -> list[str]:
    """The `server_args=ServerArgs(...)` line of a simulated server's log."""
    return [line for line in log.splitlines() if "server_args=ServerArgs(" in line]


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    """Where every payload would write; it must still be missing at the end."""
    path = tmp_path / "canary"
    yield path
    assert not path.exists(), "a payload was executed by a shell"
    assert not list(tmp_path.glob("canary*")), "a payload was executed by a shell"


def _host(tmp_path: Path, sshd: SshdHost | None = None) -> tuple[Path, Path, Path]:
    scenario = write_scenario(tmp_path / "scenario.yaml", [])
    workdir = tmp_path / "work"
    return workdir, write_hosts(tmp_path / "hosts.yaml", workdir, scenario, sshd=sshd), tmp_path / "store.db"


def _cells(values: list[str], per_cell: int) -> list[dict[str, str]]:
    """Include entries carrying the payloads, `per_cell` of them per launch (each in its own flag)."""
    flags = ("served-model-name", "revision", "download-dir")[:per_cell]
    rows = (len(values) + per_cell - 1) // per_cell
    cells = []
    for row in range(rows):
        chunk = values[row * per_cell : (row + 1) * per_cell]
        cells.append({"model-path": f"/models/{row}/{chunk[-1]}", **dict(zip(flags, chunk, strict=False))})
    return cells


def _check_literal(db: Path, sweep_id: str, cells: list[dict[str, str]]) -> None:
    """Each run passed and its server printed every payload of its cell as given."""
    with Store(db) as store:
        flags = {c.cell_id: c.flags for c in store.get_cells(sweep_id)}
        runs = store.runs(sweep_id)
    assert len(runs) == len(cells)
    for run in runs:
        assert run.run_dir is not None and run.verdict is not None
        log = Path(run.run_dir, "server.log").read_text(errors="replace")
        assert run.verdict.status is Status.PASS, log[-2000:]
        (line,) = _served(log)
        for name, value in flags[run.cell_id].items():
            if name != "tp-size":
                assert f"{name.replace('-', '_')}={value!r}" in line, (name, value)
        assert "trust_remote_code=False" in line and ", port=1," not in line


def _exported_env(cmd_sh: Path) -> dict[str, str]:
    """The environment `cmd.sh` exports, as bash itself reads it (the script's exec line is not run)."""
    script = cmd_sh.read_bytes().replace(b"\nexec ", b"\nenv -0; exit 0; exec ")
    out = subprocess.run(["bash", "-s"], input=script, capture_output=True, timeout=30, check=True).stdout
    pairs = (item.decode().partition("=") for item in out.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def test_payloads_in_flags_model_paths_env_and_name_reach_the_server_literally(tmp_path: Path, canary: Path) -> None:
    workdir, hosts, db = _host(tmp_path)
    values = payloads(canary)
    assert len(values) >= 20
    cells = _cells(values, 3)
    env = {f"ORCH_INJECTED_{i}": value for i, value in enumerate(values)}
    matrix = write_matrix(
        tmp_path / "matrix.yaml",
        name=" ".join(values[:3]),
        flags={"tp-size": 1},
        env=env,
        probes={"settle_s": 0.1},
        matrix={"include": cells},
    )
    checked = cli("validate", str(matrix), db=db)
    assert checked.returncode == 0, checked.stderr
    # Without a host nothing is checked against SGLang's flags, and validate says so (issue 20).
    assert f"{len(cells)} cells not checked against a host" in checked.stdout
    result = cli("sweep", str(matrix), "--hosts", str(hosts), "--db", str(db), db=db)
    assert reap(workdir) == []
    assert result.returncode == 0, result.stdout + result.stderr
    sweep_id = result.stdout.rsplit("sweep ", 1)[1].split()[0]
    _check_literal(db, sweep_id, cells)
    with Store(db) as store:
        assert store.get_sweep(sweep_id).name == " ".join(values[:3])
    for cmd_sh in (workdir / "runs").glob("*/cmd.sh"):
        exported = _exported_env(cmd_sh)
        assert {k: exported.get(k) for k in env} == env
    assert cli("table", sweep_id, db=db).returncode == 0


def test_payloads_on_the_run_command_line(tmp_path: Path, canary: Path) -> None:
    workdir, hosts, db = _host(tmp_path)
    value, path = payloads(canary)[0], f"/models/{payloads(canary)[8]}"
    args = ["run", "--hosts", str(hosts), "--host", "faulthost", "--db", str(db), "--json"]
    result = cli(*args, "--", "--model-path", path, "--served-model-name", value, db=db)
    assert reap(workdir) == []
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"status": "pass"' in result.stdout
    (run_dir,) = (workdir / "runs").iterdir()
    (line,) = _served((run_dir / "server.log").read_text())
    assert f"model_path={path!r}" in line and f"served_model_name={value!r}" in line


def test_flag_names_that_are_not_flag_names_are_refused_with_their_lines(tmp_path: Path, canary: Path) -> None:
    workdir, hosts, db = _host(tmp_path)
    c = str(canary)
    names = [f"model-path; touch {c}", f"$(touch {c})", "--served-model-name", "a b", f"`touch {c}`", f"x\ntouch {c}"]
    matrix = write_matrix(
        tmp_path / "matrix.yaml", name="bad-names", flags={"model-path": "/m"}, matrix={n: ["x"] for n in names}
    )
    for command in (["validate", str(matrix)], ["sweep", str(matrix), "--hosts", str(hosts)]):
        result = cli(*command, db=db)
        assert result.returncode == 1, result.stdout + result.stderr
        refused = [line for line in result.stderr.splitlines() if "is not a flag name" in line]
        assert len(refused) == len(names) and all(line.startswith(f"error: {matrix}:") for line in refused[:1])
        assert all(f"{matrix}:" in line for line in refused)
    assert not workdir.exists()


def test_unknown_flags_are_rejected_by_preflight_with_sglangs_message(tmp_path: Path, canary: Path) -> None:
    workdir, hosts, db = _host(tmp_path)
    matrix = write_matrix(
        tmp_path / "matrix.yaml",
        name="unknown-flag",
        flags={"model-path": "/m", "tp-size": 1},
        matrix={"touch-canary": [f"$(touch {canary})"], "served-model-name": ["x"]},
    )
    result = cli("sweep", str(matrix), "--hosts", str(hosts), db=db)
    # Its only cell is invalid: the sweep records it and exits 1 (issue 20: a typo in every cell must stop a script).
    assert result.returncode == 1, result.stdout + result.stderr
    assert "every cell is invalid" in result.stderr
    assert "invalid" in result.stdout and "unrecognized arguments: --touch-canary" in result.stdout
    assert not (workdir / "runs").exists()
    flag_name = cli("run", "--hosts", str(hosts), "--host", "faulthost", "--json", "--", "--model-path", "/m",
                    f"--$(touch {canary})", "x", db=db)  # fmt: skip
    assert flag_name.returncode == 0, flag_name.stderr
    assert '"status": "invalid"' in flag_name.stdout and "unrecognized arguments" in flag_name.stdout
    assert not (workdir / "runs").exists()


def test_a_nul_byte_is_refused_with_its_line_not_a_traceback(tmp_path: Path, canary: Path) -> None:
    workdir, hosts, db = _host(tmp_path)
    matrix = write_matrix(
        tmp_path / "matrix.yaml", name="nul", flags={"model-path": "/m"}, matrix={"served-model-name": ["a\0b"]}
    )
    line = next(i for i, text in enumerate(matrix.read_text().splitlines(), 1) if "\\0" in text)
    result = cli("sweep", str(matrix), "--hosts", str(hosts), db=db)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{matrix}:{line}: matrix.served-model-name[0] contains a NUL byte" in result.stderr
    assert not workdir.exists()


def test_payloads_over_ssh(tmp_path: Path, canary: Path, sshd: SshdHost) -> None:
    workdir, hosts, db = _host(tmp_path, sshd)
    values = payloads(canary)[:12]
    cells = _cells(values, 2)
    env = {f"ORCH_INJECTED_{i}": value for i, value in enumerate(values)}
    matrix = write_matrix(
        tmp_path / "matrix.yaml",
        name=values[1],
        flags={"tp-size": 1},
        env=env,
        probes={"settle_s": 0.1},
        matrix={"include": cells},
    )
    environs: dict[str, dict[str, str]] = {}

    def on_event(cell: Cell, event: str, phase: Phase | None) -> None:
        if event == "ready":
            environs.update(server_environs(workdir))

    try:
        sweep_id = run_sweep(matrix, hosts, db, hooks=SweepHooks(on_event=on_event))
    finally:
        assert reap(workdir) == []
    _check_literal(db, sweep_id, cells)
    assert len(environs) == len(cells)
    assert all({k: seen.get(k) for k in env} == env for seen in environs.values())
