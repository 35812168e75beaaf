"""Expansion follows GitHub Actions' include/exclude rules exactly (reference/peers.md 4a)."""

from __future__ import annotations

import time
from typing import Any

from orchestrator.config.model import Matrix, SecretRef
from orchestrator.matrix.expand import count_cells, expand, iter_cells, size_bounds


def matrix(axes: dict[str, list[Any]], **kw: Any) -> Matrix:
    return Matrix(name="t", path="t.yaml", text="", axes=axes, **kw)


def combos(m: Matrix) -> list[dict[str, Any]]:
    return [cell.flags for cell in expand(m)]


def test_github_docs_example_gives_its_six_jobs() -> None:
    # https://docs.github.com/actions/writing-workflows/workflow-syntax-for-github-actions
    # ("Example: Expanding configurations"), quoted in reference/peers.md 4a.
    m = matrix(
        {"fruit": ["apple", "pear"], "animal": ["cat", "dog"]},
        include=[
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"},
        ],
    )
    assert combos(m) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]
    assert count_cells(m) == 6
    assert expand(m)[0].axes == ("fruit", "animal", "color", "shape")


def test_first_axis_varies_slowest() -> None:
    m = matrix({"os": ["a", "b"], "v": [1, 2, 3]})
    assert [(c["os"], c["v"]) for c in combos(m)] == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]


def test_exclude_is_a_partial_match() -> None:
    m = matrix({"os": ["a", "b"], "v": [1, 2], "w": ["x", "y"]}, exclude=[{"os": "a", "v": 2}, {"w": "y"}])
    assert [(c["os"], c["v"], c["w"]) for c in combos(m)] == [("a", 1, "x"), ("b", 1, "x"), ("b", 2, "x")]


def test_include_can_add_back_an_excluded_combination() -> None:
    m = matrix({"os": ["a", "b"], "v": [1, 2]}, exclude=[{"os": "a", "v": 2}], include=[{"os": "a", "v": 2, "x": 1}])
    assert combos(m)[-1] == {"os": "a", "v": 2, "x": 1}
    assert count_cells(m) == 4


def test_include_never_overwrites_an_original_value() -> None:
    m = matrix({"os": ["a", "b"]}, include=[{"os": "c", "extra": 1}])
    assert combos(m) == [{"os": "a"}, {"os": "b"}, {"os": "c", "extra": 1}]


def test_later_include_overwrites_an_added_value() -> None:
    m = matrix({"os": ["a", "b"]}, include=[{"x": 1}, {"os": "b", "x": 2}, {"x": 3, "os": "a"}])
    assert combos(m) == [{"os": "a", "x": 3}, {"os": "b", "x": 2}]


def test_standalone_combinations_are_never_extended() -> None:
    m = matrix({"os": ["a"]}, include=[{"os": "z"}, {"extra": 1}])
    assert combos(m) == [{"os": "a", "extra": 1}, {"os": "z"}]


def test_no_axes_each_include_is_one_job() -> None:
    m = matrix({}, include=[{"a": 1}, {"b": 2}], base_flags={"model-path": "/m"})
    assert combos(m) == [{"model-path": "/m", "a": 1}, {"model-path": "/m", "b": 2}]


def test_everything_excluded_leaves_only_includes() -> None:
    m = matrix({"os": ["a"]}, exclude=[{"os": "a"}], include=[{"x": 1}])
    assert combos(m) == [{"x": 1}]
    nothing = matrix({"os": ["a"]}, exclude=[{"os": "a"}])
    assert expand(nothing) == [] and count_cells(nothing) == 0


def test_identical_new_combinations_run_once() -> None:
    m = matrix({"os": ["a"]}, include=[{"os": "z"}, {"os": "z"}])
    assert combos(m) == [{"os": "a"}, {"os": "z"}]
    assert count_cells(m) == 2


def test_matching_uses_canonical_spellings() -> None:
    m = matrix(
        {"attention-backend": ["triton", "nsa"], "nsa-decode-backend": ["flashmla_kv"]},
        exclude=[{"attention-backend": "triton", "dsa-decode-backend": "flashmla_kv"}],
        include=[{"attention-backend": "dsa", "sampling-backend": "pytorch"}],
    )
    assert combos(m) == [
        {"attention-backend": "dsa", "dsa-decode-backend": "flashmla_kv", "sampling-backend": "pytorch"}
    ]


def test_values_match_as_they_appear_on_the_command_line() -> None:
    m = matrix({"tp-size": [4, 8]}, exclude=[{"tp-size": "8"}])
    assert combos(m) == [{"tp-size": 4}]


def test_base_flags_and_env_reach_every_cell() -> None:
    m = matrix(
        {"a": [1, 2]},
        base_flags={"model-path": "/m", "a": 0, "trust-remote-code": True},
        env={"X": "1", "HF_TOKEN": SecretRef("ORCH_HF")},
    )
    cells = expand(m)
    assert [c.flags for c in cells] == [
        {"model-path": "/m", "a": 1, "trust-remote-code": True},
        {"model-path": "/m", "a": 2, "trust-remote-code": True},
    ]
    assert all(c.env == {"X": "1", "HF_TOKEN": "***"} for c in cells)


def test_expansion_streams() -> None:
    huge = matrix({f"a{i}": list(range(20)) for i in range(10)}, exclude=[{"a9": 0}], include=[{"a1": 3, "z": 1}])
    started = time.perf_counter()
    first = next(iter_cells(huge))
    assert first.flags["a9"] == 1
    assert count_cells(huge, limit=5000) > 5000
    assert time.perf_counter() - started < 1.0
    lower, upper = size_bounds(huge)
    assert lower == 19 * 20**9 and upper == 20**10 + 1
