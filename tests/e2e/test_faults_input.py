"""Bad input files: every problem is reported as `file:line: message (fix: ...)`, and nothing is launched.

Each broken matrix goes through `orchestrator validate` and `orchestrator sweep` as a user runs them (exit 1,
no traceback), and the host is checked afterwards: no working directory, no run directory, no store rows.
"""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.config.load import load_matrix
from orchestrator.errors import ConfigError
from tests.faults_support import store_rows, write_hosts, write_scenario

GOOD = "name: ok\nhost: faulthost\nflags: {model-path: /m}\nmatrix:\n  attention-backend: [triton]\n"


def _axes(count: int, values: int = 10) -> str:
    return "".join(f"  a{i}: [{', '.join(f'v{j}' for j in range(values))}]\n" for i in range(count))


# name -> (matrix text, line of the first error, words the message must contain)
MATRICES: dict[str, tuple[str, int, str]] = {
    "malformed YAML": (
        "name: x\nmatrix:\n  attention-backend: [triton, fa3\n  kv-cache-dtype: [auto]\n",
        4,
        "malformed YAML",
    ),
    "tab indentation": ("name: x\nmatrix:\n\tattention-backend: [triton]\n", 3, "cannot start any token"),
    "duplicate key": ("name: x\nmatrix:\n  tp-size: [1]\n  tp-size: [2]\n", 4, "duplicate key 'matrix.tp-size'"),
    "unknown key": ("name: x\nmatrix:\n  tp-size: [1]\nretires: 2\n", 4, "unknown key 'retires' at the top level"),
    "unknown probe key": ("name: x\nprobes:\n  setle_s: 1\nmatrix:\n  tp-size: [1]\n", 3, "did you mean 'settle_s'"),
    "unknown deadline": (
        "name: x\ndeadlines:\n  modle_load: 5m\nmatrix:\n  tp-size: [1]\n",
        3,
        "did you mean 'model_load'",
    ),
    "wrong type": ("name: x\nretries: two\nmatrix:\n  tp-size: [1]\n", 2, "retries: expected a valid integer"),
    "negative max_cells": ("name: x\nmax_cells: -5\nmatrix:\n  tp-size: [1]\n", 2, "greater than or equal to 1"),
    "flags as a list": (
        "name: x\nflags: [model-path, /m]\nmatrix:\n  tp-size: [1]\n",
        2,
        "expected a valid dictionary",
    ),
    "axis not a list": ("name: x\nmatrix:\n  attention-backend: triton\n", 3, "write a list"),
    "nested value": ("name: x\nmatrix:\n  tp-size: [1, [2, [4]]]\n", 3, "may hold only strings and numbers"),
    "bad duration": ("name: x\ndeadlines:\n  ready: soon\nmatrix:\n  tp-size: [1]\n", 3, "not a duration"),
    "bad secret ref": ("name: x\nenv:\n  HF_TOKEN: {secret: 1bad}\nmatrix:\n  tp-size: [1]\n", 3, "{secret: NAME}"),
    "empty matrix": ("name: x\nflags: {model-path: /m}\nmatrix: {}\n", 3, "the matrix is empty"),
    "no matrix": ("name: x\nflags: {model-path: /m}\n", 1, "the matrix is empty"),
    "empty file": ("", 1, "the file is empty"),
    "a list, not a mapping": ("- a\n- b\n", 1, "its top level is a list"),
    "exclude removes all": ("name: x\nmatrix:\n  tp-size: [1]\n  exclude:\n    - tp-size: 1\n", 4, "nothing would run"),
    "100,000 cells": ("name: big\nmatrix:\n" + _axes(5), 2, "expands to 100000 cells, more than max_cells (5000)"),
    "10^12 cells": ("name: huge\nmatrix:\n" + _axes(12), 2, "expands to 1000000000000 cells"),
    "billion laughs": (
        "name: x\nmatrix:\n  a: &a [x, y]\n"
        + "".join(f"  {k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcdefg", "bcdefgh", strict=True)),
        3,
        "may hold only strings and numbers",
    ),
}


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(workdir that must never appear, hosts file, store) of a simulated host."""
    workdir = tmp_path / "work"
    scenario = write_scenario(tmp_path / "scenario.yaml", [])
    return workdir, write_hosts(tmp_path / "hosts.yaml", workdir, scenario), tmp_path / "store.db"


def _refused(args: list[str], where: str, message: str) -> float:
    """Run a command in-process; it must exit 1 with `where: ...message` first; returns its seconds."""
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    took = time.monotonic() - started
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {where}: ") and message in result.stderr, result.stderr
    return took


@pytest.mark.parametrize("case", list(MATRICES))
def test_a_broken_matrix_is_refused_with_its_line_and_nothing_runs(
    tmp_path: Path, host: tuple[Path, Path, Path], case: str
) -> None:
    workdir, hosts, db = host
    text, line, message = MATRICES[case]
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(text)
    assert _refused(["validate", str(matrix)], f"{matrix}:{line}", message) < 10
    assert _refused(["sweep", str(matrix), "--hosts", str(hosts), "--db", str(db)], f"{matrix}:{line}", message) < 10
    assert not workdir.exists(), "the host was touched"
    assert store_rows(db) == 0


def test_bytes_that_are_not_utf8_are_refused_with_their_line(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_bytes(b"name: x\nflags: {model-path: /m\xff}\n")
    _refused(["validate", str(matrix)], f"{matrix}:2", "not UTF-8")


HOSTS: dict[str, tuple[str, int, str]] = {
    "unknown key": ("faulthost:\n  transport: sim\n  gpu: 8\n", 3, "unknown key 'gpu'"),
    "wrong type": ("faulthost:\n  transport: sim\n  gpus: eight\n", 3, "gpus: expected a valid integer"),
    "malformed YAML": ("faulthost: {transport: sim, gpus: 8\n", 2, "malformed YAML"),
    "bad ssh target": ("faulthost:\n  ssh: 'me@host:99999'\n", 2, "is not user@host[:port]"),
    "secret not in env": ("faulthost:\n  transport: sim\n  secrets: [NOPE]\n", 3, "no env of host 'faulthost' sets"),
    "NUL in env": ('faulthost:\n  transport: sim\n  env: {A: "x\\0y"}\n', 3, "contains a NUL byte"),
}


@pytest.mark.parametrize("case", list(HOSTS))
def test_a_broken_hosts_file_is_refused_with_its_line_and_nothing_runs(tmp_path: Path, case: str) -> None:
    text, line, message = HOSTS[case]
    hosts, matrix, db = tmp_path / "hosts.yaml", tmp_path / "matrix.yaml", tmp_path / "store.db"
    hosts.write_text(text)
    matrix.write_text(GOOD)
    _refused(["sweep", str(matrix), "--hosts", str(hosts), "--db", str(db)], f"{hosts}:{line}", message)
    assert store_rows(db) == 0


def test_a_100000_cell_matrix_is_refused_without_enumerating_it(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("name: big\nmatrix:\n" + _axes(5))
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="expands to 100000 cells"):
            load_matrix(matrix)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 << 20, f"refusing took {peak >> 20} MiB"


def test_a_100000_cell_matrix_allowed_by_max_cells_expands_in_bounded_memory(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("name: big\nmax_cells: 100000\nmatrix:\n" + _axes(5))
    # A child of its own: its peak resident size is the expansion's, and tracing every allocation is too slow.
    code = (
        "import resource, sys\n"
        "from orchestrator.config.load import load_matrix\n"
        "from orchestrator.matrix.expand import expand\n"
        "cells = expand(load_matrix(sys.argv[1]))\n"
        "print(len(cells), len({c.cell_id for c in cells}), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(matrix)], capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    count, unique, peak_kib = map(int, done.stdout.split())
    assert count == unique == 100_000
    assert peak_kib < 512 << 10, f"expanding 100,000 cells peaked at {peak_kib >> 10} MiB"
