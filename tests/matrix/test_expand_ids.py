"""Cell ids: one combination has one id in every sweep, whatever spelling or order the file uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.config.load import load_matrix
from orchestrator.config.model import Matrix
from orchestrator.matrix.expand import cell_id, expand
from orchestrator.model import FlagValue

BASE: dict[str, FlagValue] = {"model-path": "/models/GLM-5-NVFP4", "tp-size": 8, "trust-remote-code": True}


def ids(axes: dict[str, list[Any]], base: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    m = Matrix(name="t", path="t.yaml", text="", axes=axes, base_flags=BASE if base is None else base, **kw)
    return [c.cell_id for c in expand(m)]


def test_id_is_ten_hex() -> None:
    (only,) = ids({"attention-backend": ["triton"]})
    assert len(only) == 10 and int(only, 16) >= 0


def test_renamed_flag_and_value_alias_keep_the_id() -> None:
    old = ids({"attention-backend": ["nsa"], "nsa-decode-backend": ["flashmla_kv"]})
    new = ids({"attention-backend": ["dsa"], "dsa-decode-backend": ["flashmla_kv"]})
    underscores = ids({"attention_backend": ["dsa"], "--dsa-decode-backend": ["flashmla_kv"]})
    assert old == new == underscores


def test_key_order_does_not_matter() -> None:
    one = ids({"a": [1], "b": [2]}, base={"x": 1, "y": 2})
    other = ids({"b": [2], "a": [1]}, base={"y": 2, "x": 1})
    assert one == other


def test_axis_or_base_flag_or_include_is_the_same_launch() -> None:
    as_axis = ids({"kv-cache-dtype": ["bf16"]})
    as_base = ids({}, base={**BASE, "kv-cache-dtype": "bf16"}, include=[{}])
    as_include = ids({}, include=[{"kv-cache-dtype": "bfloat16"}])
    assert as_axis == as_base == as_include


def test_omitted_flags_do_not_count() -> None:
    assert cell_id({"a": 1, "b": False, "c": None}) == cell_id({"a": 1})
    assert cell_id({"a": True}) != cell_id({"a": "true"}) != cell_id({"a": 1})
    assert cell_id({"tp-size": 8}) == cell_id({"tp-size": "8"})


def test_env_values_are_not_part_of_the_id() -> None:
    assert ids({"a": [1]}, env={"X": "1"}) == ids({"a": [1]}, env={"X": "2"}) == ids({"a": [1]})


def test_install_is_part_of_the_id() -> None:
    before, after = ids({"a": [1]}, installs=["before", "after"])
    assert len({before, after, *ids({"a": [1]})}) == 3
    assert cell_id({**BASE, "a": 1}) == ids({"a": [1]})[0]


def test_same_ids_from_two_files(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(
        "flags: {tp-size: 8, model-path: /m}\nmatrix:\n  nsa-decode-backend: [flashmla_kv, flashmla_sparse]\n"
        "  attention-backend: [nsa]\n"
    )
    (tmp_path / "new.yaml").write_text(
        "flags: {model-path: /m, tp-size: 8}\nmatrix:\n  attention-backend: [dsa]\n"
        "  dsa-decode-backend: [flashmla_kv, flashmla_sparse]\n"
    )
    old = {c.cell_id for c in expand(load_matrix(tmp_path / "old.yaml"))}
    new = {c.cell_id for c in expand(load_matrix(tmp_path / "new.yaml"))}
    assert old == new and len(old) == 2
