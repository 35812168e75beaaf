"""Flag bundles as axis values: GitHub Actions' objects in a matrix axis, carried into cells as flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.analysis.explain import explain
from orchestrator.analysis.render import render_explanation
from orchestrator.config.load import load_matrix
from orchestrator.errors import ConfigErrors
from orchestrator.matrix.expand import cell_id, count_cells, expand, size_bounds
from orchestrator.model import Category, FlagList, FlagValue, Phase, Status
from tests.analysis.test_inputs import NAN_LINE, PASS, cell, view

QUANT = """\
flags: {model-path: /models/GLM-5}
matrix:
  quant:
    - {quantization: fp8, kv-cache-dtype: fp8_e4m3}
    - {quantization: modelopt_fp4, kv-cache-dtype: bf16}
  attention-backend: [triton, flashinfer]
"""


def load(tmp_path: Path, text: str) -> list[dict[str, FlagValue]]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return [c.flags for c in expand(load_matrix(path))]


def errors(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(ConfigErrors) as caught:
        load_matrix(path)
    return [str(e) for e in caught.value.errors]


def test_github_docs_array_of_objects_example(tmp_path: Path) -> None:
    # docs.github.com, workflow syntax, jobs.<job_id>.strategy.matrix: "A variable configuration can be
    # an array of objects. The following matrix produces 4 jobs", listed there as matrix.os plus
    # matrix.node.version / matrix.node.env; an object's keys are the cell's flags here.
    docs = """\
matrix:
  os:
    - ubuntu-latest
    - macos-latest
  node:
    - version: 14
    - version: 20
      env: NODE_OPTIONS=--openssl-legacy-provider
"""
    assert load(tmp_path, docs) == [
        {"os": "ubuntu-latest", "version": 14},
        {"os": "ubuntu-latest", "version": 20, "env": "NODE_OPTIONS=--openssl-legacy-provider"},
        {"os": "macos-latest", "version": 14},
        {"os": "macos-latest", "version": 20, "env": "NODE_OPTIONS=--openssl-legacy-provider"},
    ]


def test_github_docs_expanding_configurations_example(tmp_path: Path) -> None:
    # docs.github.com, jobs.<job_id>.strategy.matrix.include, "Example: Expanding configurations": four jobs,
    # and the one for windows-latest with node 16 also gets npm: 6.
    docs = """\
matrix:
  os: [windows-latest, ubuntu-latest]
  node: [14, 16]
  include:
    - os: windows-latest
      node: 16
      npm: 6
"""
    assert load(tmp_path, docs) == [
        {"os": "windows-latest", "node": 14},
        {"os": "windows-latest", "node": 16, "npm": 6},
        {"os": "ubuntu-latest", "node": 14},
        {"os": "ubuntu-latest", "node": 16},
    ]


def test_every_flag_of_the_bundle_is_in_the_cell(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(QUANT)
    cells = expand(load_matrix(path))
    assert [(c.flags["quantization"], c.flags["kv-cache-dtype"], c.flags["attention-backend"]) for c in cells] == [
        ("fp8", "fp8_e4m3", "triton"),
        ("fp8", "fp8_e4m3", "flashinfer"),
        ("modelopt_fp4", "bf16", "triton"),
        ("modelopt_fp4", "bf16", "flashinfer"),
    ]
    # The table and explain see the bundle's flags, never the axis name.
    assert cells[0].axes == ("quantization", "kv-cache-dtype", "attention-backend")
    assert all("quant" not in c.flags for c in cells)
    assert cells[0].label == "quantization=fp8, kv-cache-dtype=fp8_e4m3, attention-backend=triton"
    # A bundle is only a way to write flags: the same flags have the same cell id.
    plain = {"model-path": "/models/GLM-5", "quantization": "fp8", "kv-cache-dtype": "fp8_e4m3"}
    assert cells[0].cell_id == cell_id({**plain, "attention-backend": "triton"})


def test_exclude_matches_bundle_members_by_key(tmp_path: Path) -> None:
    by_flag = QUANT + "  exclude:\n    - {kv-cache-dtype: fp8_e4m3, attention-backend: triton}\n"
    github_form = QUANT + "  exclude:\n    - {quant: {kv-cache-dtype: fp8_e4m3}, attention-backend: triton}\n"
    expected = [("fp8", "flashinfer"), ("modelopt_fp4", "triton"), ("modelopt_fp4", "flashinfer")]
    for text in (by_flag, github_form):
        assert [(c["quantization"], c["attention-backend"]) for c in load(tmp_path, text)] == expected
        path = tmp_path / "m.yaml"
        lower, upper = size_bounds(load_matrix(path))
        assert count_cells(load_matrix(path)) == 3 and lower <= 3 <= upper
    whole = QUANT + "  exclude:\n    - {quant: {quantization: fp8, kv-cache-dtype: fp8_e4m3}}\n"
    assert {c["quantization"] for c in load(tmp_path, whole)} == {"modelopt_fp4"}


def test_include_extends_by_bundle_members_and_never_overwrites_them(tmp_path: Path) -> None:
    text = QUANT + (
        "  include:\n"
        "    - {kv-cache-dtype: bf16, mem-fraction-static: 0.8}\n"  # extends the bf16 bundle's cells
        "    - {quant: {quantization: fp8}, fp8-gemm-backend: cutlass}\n"  # GitHub's object form
        "    - {kv-cache-dtype: fp8_e5m2, attention-backend: triton}\n"  # would overwrite: a new cell
    )
    cells = load(tmp_path, text)
    assert len(cells) == 5
    assert [c.get("mem-fraction-static") for c in cells[:4]] == [None, None, 0.8, 0.8]
    assert [c.get("fp8-gemm-backend") for c in cells[:4]] == ["cutlass", "cutlass", None, None]
    assert cells[4] == {"model-path": "/models/GLM-5", "kv-cache-dtype": "fp8_e5m2", "attention-backend": "triton"}


def test_an_axis_named_after_a_flag_of_its_bundles(tmp_path: Path) -> None:
    text = """\
matrix:
  attention-backend:
    - {attention-backend: fa3, page-size: 64}
    - {attention-backend: triton}
  kv-cache-dtype: [bf16, fp8_e4m3]
  exclude:
    - {attention-backend: triton, kv-cache-dtype: fp8_e4m3}
"""
    path = tmp_path / "m.yaml"
    path.write_text(text)
    matrix = load_matrix(path)
    assert [c.flags for c in expand(matrix)] == [
        {"attention-backend": "fa3", "page-size": 64, "kv-cache-dtype": "bf16"},
        {"attention-backend": "fa3", "page-size": 64, "kv-cache-dtype": "fp8_e4m3"},
        {"attention-backend": "triton", "kv-cache-dtype": "bf16"},
    ]
    assert count_cells(matrix) == 3
    lower, upper = size_bounds(matrix)
    assert lower <= 3 <= upper


def test_bundles_hold_multi_value_flags_and_count_as_values(tmp_path: Path) -> None:
    text = """\
matrix:
  graphs:
    - {cuda-graph-bs: [1, 2, 4], cuda-graph-max-bs: 4}
    - {disable-cuda-graph: true}
    - {}
  tp-size: [4, 8]
"""
    path = tmp_path / "m.yaml"
    path.write_text(text)
    matrix = load_matrix(path)
    cells = expand(matrix)
    assert count_cells(matrix) == 6 and size_bounds(matrix) == (6, 6)
    assert cells[0].flags == {"cuda-graph-bs": FlagList([1, 2, 4]), "cuda-graph-max-bs": 4, "tp-size": 4}
    assert cells[2].flags == {"disable-cuda-graph": True, "tp-size": 4}
    assert cells[4].flags == {"tp-size": 4}


def test_bundle_mistakes_are_named_with_their_line(tmp_path: Path) -> None:
    mixed = "matrix:\n  quant:\n    - {quantization: fp8}\n    - fp8\n"
    assert any(":2: axis 'quant' mixes bundles" in e for e in errors(tmp_path, mixed))
    twice = QUANT + "  kv-cache-dtype: [bf16]\n"
    said = "flag 'kv-cache-dtype' is set by axis 'kv-cache-dtype' and by axis 'quant'"
    assert any(said in e for e in errors(tmp_path, twice))
    typo = QUANT + "  exclude:\n    - {kv-cache-dtpe: bf16}\n"
    found = errors(tmp_path, typo)
    assert any(":8: exclude key 'kv-cache-dtpe' is not an axis" in e and "'kv-cache-dtype'?" in e for e in found)
    value = QUANT + "  exclude:\n    - {quant: {kv-cache-dtype: fp8_e5m2}}\n"
    said = "exclude value 'fp8_e5m2' is not a value of the bundles of axis 'quant'"
    assert any(said in e for e in errors(tmp_path, value))
    scalar = QUANT + "  exclude:\n    - {quant: fp8}\n"
    assert any("exclude key 'quant' is an axis of bundles" in e for e in errors(tmp_path, scalar))
    bad_key = "matrix:\n  quant:\n    - {Quantization: fp8}\n"
    assert any("'Quantization' in matrix.quant[0] is not a flag name" in e for e in errors(tmp_path, bad_key))
    repeated = "matrix:\n  quant:\n    - {quantization: fp8}\n    - {quantization: fp8}\n"
    assert any("lists {'quantization': 'fp8'} twice" in e for e in errors(tmp_path, repeated))


def test_a_secret_value_is_never_a_bundle(tmp_path: Path) -> None:
    # `{secret: NAME}` is reserved for a flag value read from the environment at launch.
    path = tmp_path / "m.yaml"
    path.write_text("matrix:\n  api-key: [{secret: ORCH_KEY}]\n")
    try:
        cells = expand(load_matrix(path))
    except ConfigErrors as caught:
        assert not any("bundle" in str(e) for e in caught.errors)
    else:
        assert "secret" not in cells[0].flags


def test_explain_names_the_bundle_flags() -> None:
    nan = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE)
    bundles = [("fp8", "fp8_e4m3"), ("modelopt_fp4", "bf16"), ("modelopt_fp4", "fp8_e4m3")]
    cells = []
    for quantization, kv in bundles:
        for backend in ("triton", "flashinfer", "fa3"):
            flags = {"quantization": quantization, "kv-cache-dtype": kv, "attention-backend": backend}
            verdict = nan if (quantization, kv) == ("fp8", "fp8_e4m3") else PASS
            cells.append(cell(flags, verdict, axes=("quantization", "kv-cache-dtype", "attention-backend")))
    result = explain(view(cells))
    first = result.groups[0].findings[0]
    assert first.flags == {"quantization": ("fp8",)}
    text = render_explanation(result, "term")
    assert "quantization=fp8" in text and "quant=" not in text


def test_explain_says_when_a_bundle_sets_its_flags_together() -> None:
    nan = (Status.FAIL, Phase.SAMPLED_DECODE, Category.NAN_IN_PROBS, NAN_LINE)
    cells = []
    for quantization, kv in (("fp8", "fp8_e4m3"), ("modelopt_fp4", "bf16")):
        for backend in ("triton", "flashinfer", "fa3"):
            flags = {"quantization": quantization, "kv-cache-dtype": kv, "attention-backend": backend}
            cells.append(cell(flags, nan if quantization == "fp8" else PASS, axes=tuple(flags)))
    group = explain(view(cells)).groups[0]
    assert group.findings[0].flags in ({"kv-cache-dtype": ("fp8_e4m3",)}, {"quantization": ("fp8",)})
    together = [n for n in group.notes if "hold in exactly the same cells" in n]
    assert len(together) == 1
    assert "kv-cache-dtype=fp8_e4m3" in together[0] and "quantization=fp8" in together[0]
    assert "one bundle" in together[0]
