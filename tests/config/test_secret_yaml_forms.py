"""No secret byte reaches the stored matrix text, however the YAML spells it (issue 33, broken 2).

The loader decides what is secret from the parsed document (a secret-named key's value); the text kept
for the store must follow the same decision whatever the spelling: a tag, an anchor and its alias, a
folded or literal scalar, escapes, a value split over lines, a comment repeating it. Each spelling is
tried with many values (hypothesis), the text is stored in a real Store, and the database's bytes are
searched for the value.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.load import load_matrix, matrix_from_yaml
from orchestrator.config.yamlpos import parse_yaml
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.matrix.expand import expand
from orchestrator.secret import SecretRef
from orchestrator.store import Store
from tests.store.test_records import make_sweep

Spelling = Callable[[str], str]


def _double(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # YAML double quotes read JSON's escapes of `"` and `\\`


def _escaped(value: str) -> str:
    def one(c: str) -> str:
        code = ord(c)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return '"' + "".join(map(one, value)) + '"'


def _single(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _split(value: str) -> str:
    # A double-quoted scalar continued on the next line: an escaped line break joins the halves (YAML drops
    # the next line's leading blanks, so the break goes between two characters that are not blanks).
    joints = [i for i in range(1, len(value)) if value[i - 1] != " " and value[i] != " "]
    half = min(joints, key=lambda i: abs(i - len(value) // 2))
    return f"{_double(value[:half])[:-1]}\\\n    {_double(value[half:])[1:]}"


def _block(indicator: str) -> Spelling:
    return lambda value: f"{indicator}\n    {value}"


SPELLINGS: dict[str, Spelling] = {
    "double quotes": lambda v: f"flags:\n  api-key: {_double(v)}\nmatrix: {{a: [1]}}\n",
    "every character escaped": lambda v: f"flags:\n  api-key: {_escaped(v)}\nmatrix: {{a: [1]}}\n",
    "single quotes": lambda v: f"flags:\n  api-key: {_single(v)}\nmatrix: {{a: [1]}}\n",
    "a !!str tag": lambda v: f"flags:\n  api-key: !!str {_double(v)}\nmatrix: {{a: [1]}}\n",
    "a flow mapping": lambda v: f"flags: {{tp-size: 1, api-key: {_double(v)}}}\nmatrix: {{a: [1]}}\n",
    "an anchor used again": lambda v: (
        f"flags:\n  api-key: &key {_double(v)}\nenv: {{OTHER: *key}}\nmatrix: {{a: [1]}}\n"
    ),
    "an alias of a plain value": lambda v: (
        f"env:\n  OTHER: &key {_double(v)}\nflags: {{api-key: *key}}\nmatrix: {{a: [1]}}\n"
    ),
    "a literal block": lambda v: f"flags:\n  api-key: {_block('|-')(v)}\nmatrix: {{a: [1]}}\n",
    "a folded block": lambda v: f"flags:\n  api-key: {_block('>-')(v)}\nmatrix: {{a: [1]}}\n",
    "split over two lines": lambda v: f"flags:\n  api-key: {_split(v)}\nmatrix: {{a: [1]}}\n",
    "a comment repeating it": lambda v: (
        f"# the key is {v}\nflags:\n  api-key: {_double(v)}  # {v}\nmatrix: {{a: [1]}}\n"
    ),
    "an include entry": lambda v: f"matrix:\n  a: [1, 2]\n  include:\n    - {{a: 1, api-key: {_double(v)}}}\n",
    "a secret variable": lambda v: f"env:\n  HF_TOKEN: {_double(v)}\nmatrix: {{a: [1]}}\n",
    "a merge key": lambda v: f"flags:\n  <<: {{api-key: {_double(v)}}}\n  tp-size: 1\nmatrix: {{a: [1]}}\n",
}

# Values a real key might hold, and the characters YAML makes special: quotes, backslashes, `#`, `: `, non-ASCII.
VALUE_TEXT = st.text(
    st.characters(categories=("L", "N", "P", "S"), exclude_characters="\ufeff") | st.sampled_from(" '\"\\#:&*!|>"),
    min_size=0,
    max_size=30,
)


def _value(middle: str) -> tuple[str, list[str]]:
    """A secret value whose two ends are random tokens: finding either in the store is a leak."""
    ends = [f"Sk{secrets.token_hex(5)}", f"Zq{secrets.token_hex(5)}"]
    return f"{ends[0]} {middle.strip()} {ends[1]}", ends


def _stored_bytes(tmp_path: Path, text: str) -> bytes:
    db = tmp_path / f"s-{secrets.token_hex(4)}.db"
    with Store(db) as store:
        store.create_sweep(make_sweep(matrix_yaml=text))
    return b"".join(p.read_bytes() for p in tmp_path.glob(f"{db.name}*"))


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(middle=VALUE_TEXT)
def test_no_secret_byte_in_the_stored_matrix(tmp_path: Path, spelling: str, middle: str) -> None:
    value, ends = _value(middle)
    source = SPELLINGS[spelling](value)
    matrix = matrix_from_yaml(parse_yaml(source, "m.yaml"))
    flags = [*matrix.base_flags.values(), *[x for e in matrix.include for x in e.values()]]
    held = [v.value for v in flags if isinstance(v, SecretRef)]
    assert value in held or matrix.env.get("HF_TOKEN") == value  # the loader read the value the file spells
    stored = matrix.text
    assert all(end not in stored for end in ends), stored
    assert all(end.encode() not in _stored_bytes(tmp_path, stored) for end in ends)
    # The text stays the same matrix, each secret then read from its variable, on the same lines.
    assert stored.count("\n") == source.count("\n")
    again = matrix_from_yaml(parse_yaml(stored, "m.yaml"))
    assert [c.cell_id for c in expand(again)] == [c.cell_id for c in expand(matrix)]
    refs = [*again.base_flags.values(), *again.env.values(), *[x for e in again.include for x in e.values()]]
    assert any(isinstance(r, SecretRef) and r.value is None for r in refs)


def test_the_reference_names_the_variable_the_warning_names(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("flags:\n  api-key: !!str &k sk-live-1234\n  tp-size: 2\nmatrix: {a: [1]}\n")
    matrix = load_matrix(path)
    assert matrix.text == "flags:\n  api-key: &k {secret: ORCH_API_KEY}\n  tp-size: 2\nmatrix: {a: [1]}\n"


def test_a_file_without_secrets_is_kept_byte_for_byte(tmp_path: Path) -> None:
    text = "# sweep\nflags: {api-key: {secret: ORCH_API_KEY}, enable-metrics: true}\nmatrix: {a: [1, 2]}\n"
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert load_matrix(path).text == text


def _errors(tmp_path: Path, text: str) -> list[ConfigError]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises((ConfigError, ConfigErrors)) as caught:
        load_matrix(path)
    found = caught.value
    return list(found.errors) if isinstance(found, ConfigErrors) else [found]


@pytest.mark.parametrize(
    "text",
    [
        "matrix:\n  api-key: [sk-first-1111, sk-second-2222]\n  tp-size: [1]\n",
        "matrix:\n  api-key:\n    - !!str sk-first-1111\n    - sk-second-2222\n",
        "matrix:\n  pair:\n    - {api-key: sk-first-1111, tp-size: 1}\n    - {api-key: sk-second-2222, tp-size: 1}\n",
        "matrix:\n  api-key: [sk-first-1111, sk-first-1111]\n  exclude: [{api-key: sk-second-2222}]\n",
    ],
)
def test_a_secret_as_an_axis_value_is_refused_naming_the_line_and_the_fix(tmp_path: Path, text: str) -> None:
    errors = _errors(tmp_path, text)
    secret_errors = [e for e in errors if "is a secret, given in clear text as a value of axis" in str(e)]
    assert secret_errors and all(e.file == str(tmp_path / "m.yaml") and e.line for e in secret_errors)
    assert "flags: {api-key: {secret: ORCH_API_KEY}}" in str(secret_errors[0])
    assert {e.line for e in secret_errors} <= {2, 3, 4}
    # No message repeats the values it refuses.
    assert not any("first" in str(e) or "second" in str(e) for e in errors)


def test_secret_references_as_axis_values_are_cells_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("matrix:\n  api-key: [{secret: KEY_A}, {secret: KEY_B}]\n")
    assert len({c.cell_id for c in expand(load_matrix(path))}) == 2


def test_a_secret_flag_given_as_a_list_is_refused(tmp_path: Path) -> None:
    (error,) = _errors(tmp_path, "flags:\n  api-key: [sk-first-1111]\nmatrix: {a: [1]}\n")
    assert error.line == 2 and "as a list" in str(error) and "{secret: ORCH_API_KEY}" in str(error)
    assert "first" not in str(error)
