"""Matrix files: validated at the boundary, every error with file, line and fix, nothing launched."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest

from orchestrator.config.load import load_matrix
from orchestrator.config.model import HostConfig, SecretRef, effective_deadlines
from orchestrator.config.yamlpos import MAX_YAML_BYTES
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.matrix.expand import expand
from orchestrator.model import FlagList
from tests.paths import REPO

INCIDENT = REPO / "configs" / "glm5-nvfp4-sm120.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def errors_of(path: Path) -> list[ConfigError]:
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    return err.value.errors if isinstance(err.value, ConfigErrors) else [err.value]


def only_error(path: Path) -> ConfigError:
    errors = errors_of(path)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def test_incident_matrix() -> None:
    matrix = load_matrix(INCIDENT)
    assert matrix.name == "glm5-nvfp4-sm120"
    assert matrix.host == "sim"
    assert matrix.retries == 1
    assert matrix.deadlines.model_load == 30 * 60
    assert matrix.text == INCIDENT.read_text()
    cells = expand(matrix)
    assert len(cells) == 30
    assert len({c.cell_id for c in cells}) == len(cells)
    assert not [c for c in cells if c.flags["attention-backend"] == "triton" and c.flags["kv-cache-dtype"] == "bf16"]
    for cell in cells:
        assert "dsa-decode-backend" in cell.flags and "nsa-decode-backend" not in cell.flags
        assert cell.flags["tp-size"] == 8 and cell.flags["trust-remote-code"] is True
        assert (cell.flags.get("sampling-backend") == "pytorch") == (cell.flags["attention-backend"] == "dsa")
        assert cell.axes[-1] == "sampling-backend"


def test_typo_key_suggests_the_right_one(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "name: x\nmatrix: {a: [1]}\nretires: 1\n"))
    assert error.file == str(tmp_path / "matrix.yaml")
    assert error.line == 3
    assert "unknown key 'retires'" in error.message
    assert error.fix == "did you mean 'retries'?"
    assert str(error).startswith(f"{tmp_path / 'matrix.yaml'}:3: ")


def test_unknown_top_level_key_lists_the_known_ones(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix: {a: [1]}\nwhatever: 1\n"))
    assert error.line == 2
    assert "at the top level" in error.message
    assert error.fix is not None and "retries" in error.fix and "matrix" in error.fix


def test_wrong_type_says_what_is_expected(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix: {a: [1]}\n\nretries: two\n"))
    assert error.line == 3
    assert "retries: expected a valid integer, got 'two'" in error.message
    assert error.fix == "write it like `retries: 1`"


def test_axis_must_be_a_list(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix:\n  kv-cache-dtype: fp8_e4m3\n"))
    assert error.line == 2
    assert "expected a valid list" in error.message
    assert error.fix == "write a list: `kv-cache-dtype: [fp8_e4m3]`"


def test_values_are_scalars_or_flat_lists(tmp_path: Path) -> None:
    errors = errors_of(write(tmp_path, "flags:\n  tp-size: [[8]]\nmatrix:\n  a: [1, [2, [3]]]\n  b: [x, true]\n"))
    assert [(e.line, "may hold only strings and numbers" in e.message) for e in errors] == [(2, True), (4, True)]
    assert errors[0].fix is not None and "flat list" in errors[0].fix


def test_a_list_is_the_values_of_a_multi_value_flag(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, "flags:\n  cuda-graph-bs: [1, 2, 4]\nmatrix:\n  a: [x]\n"))
    assert matrix.base_flags["cuda-graph-bs"] == FlagList([1, 2, 4])


def test_malformed_yaml(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "name: x\nmatrix:\n  a: [1, 2\n  b: [3]\n"))
    assert error.line == 4 and "malformed YAML" in error.message


@pytest.mark.parametrize(
    "text",
    ["name: x\n", "name: x\nmatrix:\n", "name: x\nmatrix: {}\n", "matrix:\n  exclude: []\n"],
)
def test_empty_matrix_is_an_error(tmp_path: Path, text: str) -> None:
    error = only_error(write(tmp_path, text))
    assert "the matrix is empty" in error.message


def test_exclude_that_removes_everything(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix:\n  a: [1, 2]\n  b: [x]\n  exclude:\n    - {b: x}\n"))
    assert error.line == 4
    assert "exclude removes every combination" in error.message


def test_every_error_in_one_pass(tmp_path: Path) -> None:
    text = (
        "name: x\n"
        "retires: 1\n"
        "flags:\n"
        "  --tp-size: 8\n"
        "matrix:\n"
        "  attention-backend: [triton, nsa, dsa]\n"
        "  exclude:\n"
        "    - {kv-cache-dtype: bf16}\n"
        "deadlines: {model_lod: 30m}\n"
        "max_cells: 0\n"
    )
    errors = errors_of(write(tmp_path, text))
    assert [e.line for e in errors] == [2, 4, 6, 8, 9, 10]
    assert errors[1].fix == "write 'tp-size', without leading dashes"
    assert "'dsa' twice" in errors[2].message
    assert "not an axis" in errors[3].message
    assert errors[4].fix == "did you mean 'model_load'?"


def test_one_flag_under_two_spellings(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix:\n  nsa-decode-backend: [a]\n  dsa-decode-backend: [b]\n"))
    assert error.line == 3 and "same flag (dsa-decode-backend)" in error.message


def test_exclude_value_that_matches_nothing(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix:\n  a: [triton, dsa]\n  exclude: [{a: trition}]\n"))
    assert "excludes nothing" in error.message and error.fix == "did you mean 'triton'?"


def test_exclude_may_use_the_other_spelling(tmp_path: Path) -> None:
    path = write(tmp_path, "matrix:\n  attention-backend: [triton, dsa]\n  exclude: [{attention-backend: nsa}]\n")
    assert [c.flags["attention-backend"] for c in expand(load_matrix(path))] == ["triton"]


def test_hundred_thousand_cells_refused_fast_in_bounded_memory(tmp_path: Path) -> None:
    axes = "".join(f"  axis-{n}: [{', '.join(f'v{i}' for i in range(10))}]\n" for n in range(5))
    path = write(tmp_path, f"name: big\nmatrix:\n{axes}")
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "expands to 100000 cells, more than max_cells (5000)" in str(err.value)
    assert err.value.line == 2
    assert elapsed < 2.0
    assert peak < 2_000_000


def test_astronomical_matrix_with_include_and_exclude_refused_fast(tmp_path: Path) -> None:
    axes = "".join(f"  axis-{n}: [{', '.join(f'v{i}' for i in range(20))}]\n" for n in range(10))
    extra = "  exclude: [{axis-0: v0}]\n  include: [{axis-1: v1, other: x}]\n"
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_matrix(write(tmp_path, f"matrix:\n{axes}{extra}"))
    assert time.perf_counter() - started < 2.0
    assert "at least" in str(err.value)


def test_excludes_can_bring_a_matrix_under_the_limit(tmp_path: Path) -> None:
    a = ", ".join(f"a{i}" for i in range(60))
    b = ", ".join(f"b{i}" for i in range(100))
    excludes = "".join(f"    - {{a: a{i}}}\n" for i in range(10))
    matrix = load_matrix(write(tmp_path, f"matrix:\n  a: [{a}]\n  b: [{b}]\n  exclude:\n{excludes}"))
    assert len(expand(matrix)) == 5000


def test_max_cells_is_configurable(tmp_path: Path) -> None:
    text = "matrix:\n  a: [1, 2, 3]\n  b: [x, y]\nmax_cells: {}\n"
    error = only_error(write(tmp_path, text.format(5)))
    assert error.line == 4 and "expands to 6 cells, more than max_cells (5)" in error.message
    assert len(expand(load_matrix(write(tmp_path, text.format(6))))) == 6


def test_secrets_keep_only_their_reference(tmp_path: Path) -> None:
    text = (
        "matrix: {a: [1, 2]}\n"
        "env:\n"
        "  HF_TOKEN: {secret: ORCH_HF_TOKEN}\n"
        "  OPENAI_API_KEY: sk-literal-value\n"
        "  SGLANG_ENABLE_JIT_DEEPGEMM: 1\n"
    )
    matrix = load_matrix(write(tmp_path, text))
    assert matrix.env["HF_TOKEN"] == SecretRef("ORCH_HF_TOKEN")
    assert matrix.env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "1"
    for cell in expand(matrix):
        assert cell.env == {"HF_TOKEN": "***", "OPENAI_API_KEY": "***", "SGLANG_ENABLE_JIT_DEEPGEMM": "1"}
        assert "sk-literal-value" not in repr(cell)


def test_bad_environment_entries(tmp_path: Path) -> None:
    errors = errors_of(write(tmp_path, "matrix: {a: [1]}\nenv:\n  FLAG: true\n  bad-name: x\n  T: {secret: 1x}\n"))
    assert [e.line for e in errors] == [3, 4, 5]
    assert "quote the value" in (errors[0].fix or "")


def test_installs_multiply_cells(tmp_path: Path) -> None:
    cells = expand(load_matrix(write(tmp_path, "matrix: {a: [1, 2]}\ninstalls: [before, after]\n")))
    assert [(c.flags["a"], c.install) for c in cells] == [(1, "before"), (1, "after"), (2, "before"), (2, "after")]
    assert len({c.cell_id for c in cells}) == 4
    assert cells[0].label == "install=before, a=1"


def test_installs_belong_at_the_top_level(tmp_path: Path) -> None:
    error = only_error(write(tmp_path, "matrix:\n  a: [1]\n  installs: [before, after]\n"))
    assert error.line == 3 and error.fix == "move `installs: [...]` to the top level"


def test_deadlines_and_probes(tmp_path: Path) -> None:
    text = (
        "matrix: {a: [1]}\n"
        "deadlines: {model_load: 40m, ready: 90}\n"
        "probes: {sampled_temperature: 1.0, greedy: {prompt: 'Two plus two is', expect_any: [four, '4']}}\n"
    )
    matrix = load_matrix(write(tmp_path, text))
    assert matrix.deadlines.model_load == 2400 and matrix.deadlines.ready == 90
    assert matrix.probes.greedy.expect_any == ("four", "4") and matrix.probes.sampled_temperature == 1.0
    host = HostConfig(name="h", transport="local", deadlines={"model_load": 60.0, "probe": 5.0})
    merged = effective_deadlines(host, matrix)
    assert (merged.model_load, merged.probe, merged.ready) == (2400, 5.0, 90)


def test_bad_deadlines_and_probes(tmp_path: Path) -> None:
    text = "matrix: {a: [1]}\ndeadlines: {ready: 5 min}\nprobes:\n  sampled_temprature: 1\n  settle_s: soon\n"
    errors = errors_of(write(tmp_path, text))
    assert [e.line for e in errors] == [2, 4, 5]
    assert errors[0].fix == "write e.g. 90s, 30m or 1.5h"
    assert errors[1].fix == "did you mean 'sampled_temperature'?"


def test_a_file_over_the_size_cap_is_refused_naming_it_and_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "matrix: {a: [1]}\n" + "#" * MAX_YAML_BYTES)
    tracemalloc.start()
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert err.value.file == str(path) and "larger than 4 MiB" in str(err.value)
    assert peak < 3 * MAX_YAML_BYTES


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_a_device_a_pipe_or_a_folder_is_refused_without_reading_it(tmp_path: Path, special: str) -> None:
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "matrix.yaml"
        os.mkfifo(path)  # no writer: opening it for reading would wait forever
    elif special == "folder":
        path = tmp_path
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    assert time.perf_counter() - started < 1.0
    assert err.value.file == str(path) and "so it is not read" in str(err.value)
    assert "pass the path of the YAML file itself" in str(err.value)


def test_a_wrong_duration_says_its_fix_once(tmp_path: Path) -> None:
    text = "flags: {model-path: /m}\nmatrix:\n  a: [1]\ndeadlines: {model_load: 30 minutes}\n"
    error = only_error(write(tmp_path, text))
    assert str(error) == (
        f"{tmp_path / 'matrix.yaml'}:4: deadlines.model_load: not a duration: '30 minutes' "
        "(fix: write e.g. 90s, 30m or 1.5h)"
    )


def test_a_flag_set_in_flags_and_by_an_axis_is_an_error(tmp_path: Path) -> None:
    # Every cell would take the axis' value and drop the flags: one silently, so the user is told which to keep.
    text = "flags:\n  model-path: /m\n  nsa-decode-backend: fa3\nmatrix:\n  dsa-decode-backend: [flashmla_kv, fa3]\n"
    error = only_error(write(tmp_path, text))
    assert error.line == 3 and "'nsa-decode-backend' is set in flags: and by axis 'dsa-decode-backend'" in str(error)
    bundle = "flags:\n  model-path: /m\n  kv-cache-dtype: bf16\nmatrix:\n"
    bundle += "  q: [{quantization: fp8, kv-cache-dtype: fp8_e4m3}]\n"
    assert only_error(write(tmp_path, bundle)).line == 3


def test_a_flag_that_only_some_bundles_set_keeps_its_flags_value_as_the_default(tmp_path: Path) -> None:
    # flags: is the default; a bundle that sets the flag overrides it for its cells, the others keep it.
    text = "flags:\n  model-path: /m\n  kv-cache-dtype: bf16\nmatrix:\n"
    text += "  q: [{quantization: fp8, kv-cache-dtype: fp8_e4m3}, {quantization: w8a8_fp8}]\n"
    matrix = load_matrix(write(tmp_path, text))
    kv = sorted(str(c.flags.get("kv-cache-dtype")) for c in expand(matrix))
    assert kv == ["bf16", "fp8_e4m3"]
