"""ARGUMENT_NAMES is generated (scripts/gen_argnames) from captured sources, and the committed file is current."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from orchestrator.knowledge.argnames import ARGUMENT_NAMES
from tests.paths import REPO, SGLANG_CAPTURES, require_fixtures


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_argnames", REPO / "scripts" / "gen_argnames.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _gen()


def _names_of(text: str) -> set[str]:
    """The names a rendered argnames.py holds, read back from its text."""
    module = ast.parse(text)
    (assign,) = [node for node in module.body if isinstance(node, ast.AnnAssign)]
    assert isinstance(assign.value, ast.Call)
    return set(ast.literal_eval(assign.value.args[0]))


def test_committed_argnames_is_what_the_generator_writes_now() -> None:
    require_fixtures()
    committed = (REPO / "orchestrator" / "knowledge" / "argnames.py").read_text(encoding="utf-8")
    assert committed == gen.render(gen.collect()), "argnames.py is stale: run scripts/gen_argnames"


def test_every_captured_flag_and_grammar_spelling_is_a_known_argument_name() -> None:
    require_fixtures()
    for flags in sorted(SGLANG_CAPTURES.glob("*/flags.json")):
        for name, spec in json.loads(flags.read_text()).items():
            for flag in (name, *(spec.get("aliases") or [])):
                under = flag.lstrip("-").replace("-", "_")
                assert "_" not in under or under in ARGUMENT_NAMES, (flags, flag)
    for name in gen.grammar_names():
        assert "_" not in name or name in ARGUMENT_NAMES, name


def test_every_vllm_name_of_two_words_is_a_known_argument_name() -> None:
    vllm = gen.read_vllm_data()
    # The engine arguments vLLM's config checks name, from the oldest and the newest release captured.
    assert {"max_model_len", "gpu_memory_utilization", "num_scheduler_steps", "numa_bind_nodes"} <= vllm
    assert {"api_server_count", "enable_auto_tool_choice"} <= vllm  # `vllm serve` options, not EngineArgs fields
    assert gen.kept(vllm) <= ARGUMENT_NAMES
    assert "model" in vllm and "model" not in ARGUMENT_NAMES  # one word: an ordinary word in any message


def test_vllm_names_are_dataclass_fields_and_add_argument_flags_never_private_fields() -> None:
    source = '''
@dataclass
class EngineArgs:
    max_model_len: int | None = None
    _api_process_count: int = 1
    def helper(self) -> None:
        local_name: int = 0

class Unrelated:
    not_an_argument: int = 0

def add_cli_args(parser):
    parser.add_argument("--api-server-count", "-asc", type=int)
    parser.add_argument(f"--{name}")
    group.add_argument("--headless", action="store_true")
'''
    assert gen.vllm_source_names(source) == {"max_model_len", "api_server_count", "headless"}


def test_help_text_gives_whole_names_only(tmp_path: Path) -> None:
    release = tmp_path / "9.9.9"
    release.mkdir()
    (release / "flags.json").write_text(json.dumps({"--tp-size": {"aliases": ["--tensor-parallel-size"]}}))
    # argparse wraps help text: `--kv-` at a line end is half a name; `--cuda-graph-*` names a family, not a flag.
    (release / "help.txt").write_text(
        "  --max-model-len MAX_MODEL_LEN\n     Use the dp_size ports packed after the --kv-\n"
        "     events port. Use --cuda-graph-* flags, or the-max-model-len, or --Bad-Case.\n"
    )
    names = gen.capture_names(tmp_path)
    assert names == {"tp_size", "tensor_parallel_size", "max_model_len"}
    assert gen.kept({"tp_size", "model", "cuda_graph_", "kv_"}) == {"tp_size"}


def test_a_bad_vllm_data_line_is_named_with_its_file_line_and_fix(tmp_path: Path) -> None:
    data = tmp_path / "vllm.txt"
    data.write_text("# header\nmax_model_len 0.7.3 0.34.0\n\n--enforce-eager 0.7.3\n")
    with pytest.raises(SystemExit, match=r"vllm\.txt:4: '--enforce-eager 0\.7\.3' is not `name version\.\.\.`.*fix"):
        gen.read_vllm_data(data)
    data.write_text("max_model_len 0.7.3\nenforce_eager\n")
    assert gen.read_vllm_data(data) == {"max_model_len", "enforce_eager"}


def test_a_wheel_gives_its_release_digest_and_names_and_they_round_trip(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm-0.99.0-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("vllm/engine/arg_utils.py", "class EngineArgs:\n    max_num_seqs: int = 256\n")
        archive.writestr(
            "vllm/entrypoints/common/cli_args.py",
            "class BaseFrontendArgs:\n    enable_auto_tool_choice: bool = False\n",
        )
    version, digest, names = gen.wheel_names(wheel)
    assert (version, digest) == ("0.99.0", hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert names == {"max_num_seqs", "enable_auto_tool_choice"}
    text = gen.render_vllm_data([("0.1.0", "vllm-0.1.0.whl", "ab" * 32, {"max_num_seqs", "seed"}),
                                 (version, wheel.name, digest, names)])
    assert f"vllm 0.99.0: {wheel.name} sha256 {digest}" in text
    assert "\nmax_num_seqs 0.1.0 0.99.0\n" in text
    data = tmp_path / "vllm.txt"
    data.write_text(text)
    assert gen.read_vllm_data(data) == {"max_num_seqs", "seed", "enable_auto_tool_choice"}


def test_a_file_that_is_no_vllm_wheel_is_refused_by_name(tmp_path: Path) -> None:
    other = tmp_path / "torch-2.0.0-cp38-abi3-manylinux1_x86_64.whl"
    with pytest.raises(SystemExit, match="not a vLLM wheel"):
        gen.wheel_names(other)
    empty = tmp_path / "vllm-1.0.0-py3-none-any.whl"
    zipfile.ZipFile(empty, "w").close()
    with pytest.raises(SystemExit, match=r"has no vllm/engine/arg_utils\.py"):
        gen.wheel_names(empty)


def test_render_is_sorted_packed_within_120_columns_and_independent_of_order() -> None:
    names = {f"name_{i:03d}_with_some_length" for i in range(60)}
    text = gen.render(sorted(names, reverse=True))
    assert text == gen.render(sorted(names))
    assert _names_of(text) == names
    assert "Generated by `scripts/gen_argnames`" in text and "do not edit" in text
    assert all(len(line) <= 120 for line in text.splitlines())
    body = text.split("frozenset((\n", 1)[1].split("\n))", 1)[0]
    quoted = [item.strip() for line in body.splitlines() for item in line.split(",") if item.strip()]
    assert quoted == sorted(quoted)
