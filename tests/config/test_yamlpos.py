"""YAML loading keeps the line of every key and item, and malformed YAML names its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.yamlpos import MAX_YAML_BYTES, load_yaml, parse_yaml, read_capped
from orchestrator.errors import ConfigError

DOC = """\
name: x
flags:
  tp-size: 8
  trust-remote-code: true
matrix:
  attention-backend:
    - triton
    - dsa
  include:
    - {sampling-backend: pytorch}
"""


def test_lines_of_keys_and_items() -> None:
    doc = parse_yaml(DOC, "m.yaml")
    assert doc.data["flags"] == {"tp-size": 8, "trust-remote-code": True}
    assert doc.line_of(("name",)) == 1
    assert doc.line_of(("flags", "trust-remote-code")) == 4
    assert doc.line_of(("matrix", "attention-backend", 1)) == 8
    assert doc.line_of(("matrix", "include", 0, "sampling-backend")) == 10
    assert doc.line_of(("matrix", "nope")) is None
    assert doc.nearest_line(("matrix", "attention-backend", 7, "x")) == 6
    assert doc.nearest_line(("absent",)) == 1


def test_only_true_and_false_are_booleans() -> None:
    # YAML 1.1 would read these as booleans and launch `--flag False` for `off`.
    doc = parse_yaml("a: off\nb: yes\nc: on\nd: true\ne: False\n", "m.yaml")
    assert doc.data == {"a": "off", "b": "yes", "c": "on", "d": True, "e": False}


def test_malformed_yaml_names_file_and_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("name: x\nmatrix:\n  a: [1, 2\n  b: 3\n", "bad.yaml")
    assert err.value.file == "bad.yaml"
    assert err.value.line == 4
    assert "malformed YAML" in str(err.value)
    assert err.value.fix


def test_bad_indentation() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("name: x\n  flags: 1\n", "bad.yaml")
    assert err.value.line == 2


def test_duplicate_keys_are_errors() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("flags:\n  tp-size: 8\n  tp-size: 4\n", "dup.yaml")
    assert err.value.line == 3
    assert "first given on line 2" in str(err.value)


def test_merge_keys_are_not_duplicates() -> None:
    doc = parse_yaml("base: &b {a: 1, c: 2}\nx:\n  <<: *b\n  a: 3\n", "m.yaml")
    assert doc.data["x"] == {"a": 3, "c": 2}
    assert doc.line_of(("x", "a")) == 4


def test_empty_document_and_unreadable_file(tmp_path: Path) -> None:
    assert parse_yaml("", "e.yaml").data is None
    with pytest.raises(ConfigError) as err:
        load_yaml(tmp_path / "missing.yaml")
    assert err.value.file == str(tmp_path / "missing.yaml")


def test_a_file_at_the_size_cap_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    body = "# " + "x" * (MAX_YAML_BYTES - 3) + "\n"
    path.write_text(body)
    assert read_capped(path) == body.encode()
    path.write_text(body + "\n")
    with pytest.raises(ConfigError, match="larger than 4 MiB"):
        read_capped(path)


def test_the_node_tree_and_its_anchors_are_kept_for_rewriting() -> None:
    doc = parse_yaml("a: &first !!str one\nb: *first\nc: [two]\n", "m.yaml")
    assert doc.node is not None
    (_, value_a), (_, value_b), _ = doc.node.value
    assert value_b is value_a and doc.anchor_of[id(value_a)] == "first"
    assert doc.text[value_a.start_mark.index : value_a.end_mark.index] == "&first !!str one"


def test_a_tab_in_the_indentation_is_named_as_such() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml("matrix:\n\tattention-backend: [triton]\n", "m.yaml")
    assert caught.value.line == 2 and "tab" in (caught.value.fix or ""), str(caught.value)
