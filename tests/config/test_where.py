"""An invalid cell's reason names a flag; the matrix file says on which line that flag and value were written."""

from __future__ import annotations

from orchestrator.config.load import matrix_from_yaml
from orchestrator.config.where import problem_places
from orchestrator.config.yamlpos import parse_yaml
from orchestrator.matrix.expand import expand

TEXT = """name: w
flags:
  model-path: /m
  tp-size: 8
matrix:
  nsa-decode-backend: [flashmla_kv, fa9]
  kv-cache-dtype: [bf16]
  exclude:
    - {nsa-decode-backend: flashmla_kv, kv-cache-dtype: fp8_e4m3}
  include:
    - {kv-cache-dtype: bf16, enable-dp-attenton: true}
"""


def test_places_follow_the_spelling_and_skip_exclude_and_suggestions() -> None:
    doc = parse_yaml(TEXT.replace("[bf16]", "[bf16, fp8_e4m3]"), "m.yaml")
    cells = expand(matrix_from_yaml(doc))
    bad = next(c for c in cells if c.flags.get("dsa-decode-backend") == "fa9" and c.flags["kv-cache-dtype"] == "bf16")
    problems = (
        "argument --nsa-decode-backend: invalid choice: 'fa9' (choose from 'flashmla_kv', 'fa3')",
        "--enable-dp-attenton does not exist in sglang 0.5.9; did you mean --enable-dp-attention?",
        "--tp-size/--tensor-parallel-size: invalid int value",
    )
    places = [(p.flag, p.value, p.line) for p in problem_places(doc, bad, problems)]
    assert places == [("nsa-decode-backend", "fa9", 6), ("enable-dp-attenton", True, 11), ("tp-size", 8, 4)]
    assert problem_places(doc, bad, ("the host has 4 GPUs",)) == []
