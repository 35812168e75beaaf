"""Records of the store: ids, row round trips, secret scrubbing. Builders here are reused by the other store tests."""

from __future__ import annotations

import re
from typing import Any

import pytest

from orchestrator.errors import StoreError
from orchestrator.model import Category, Cell, Phase, ProbeOutcome, ProbeResult, Status, Verdict
from orchestrator.store.records import RunRecord, SweepRecord, cell_from_row, cell_to_row, new_run_id, new_sweep_id
from orchestrator.store.secrets import MASK, is_secret_name, scrub, scrub_text

MATRIX_YAML = "name: glm5\naxes:\n  attention-backend: [triton, flashinfer]\n"


def make_sweep(sweep_id: str = "s-20261202-153012-ab12", started_at: float = 1_800_000_000.0, **kw: Any) -> SweepRecord:
    """A sweep record with every field set."""
    fields: dict[str, Any] = {
        "sweep_id": sweep_id,
        "name": "glm5-nvfp4-sm120",
        "host": "sim",
        "matrix_yaml": MATRIX_YAML,
        "matrix_path": "configs/glm5.yaml",
        "started_at": started_at,
        "host_facts": {"gpus": 8, "gpu_name": "RTX PRO 6000"},
        "versions": {"sglang": "0.5.9", "torch": "2.9.1"},
        "settings": {"retries": 1, "deadlines": {"load": 600.0}},
    }
    return SweepRecord(**(fields | kw))


def make_cell(backend: str = "triton", kv: str = "fp8_e4m3", **kw: Any) -> Cell:
    """A two-axis cell whose id follows its flag values."""
    fields: dict[str, Any] = {
        "cell_id": f"c-{backend}-{kv}",
        "flags": {"model-path": "zai/GLM-5", "attention-backend": backend, "kv-cache-dtype": kv, "tp-size": 8},
        "axes": ("attention-backend", "kv-cache-dtype"),
        "env": {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"},
    }
    return Cell(**(fields | kw))


def make_verdict(status: Status = Status.FAIL, **kw: Any) -> Verdict:
    """A verdict; failures default to the incident's NaN on the first sampled decode."""
    if status is Status.PASS:
        return Verdict(Status.PASS, None, Category.HEALTHY, **kw)
    fields: dict[str, Any] = {
        "phase": Phase.SAMPLED_DECODE,
        "category": Category.NAN_IN_PROBS,
        "root_cause_line": "[2026-12-02 15:31:07 TP0] RuntimeError: probability tensor contains either `inf`, `nan`",
        "reason": "sampled probe failed",
    }
    return Verdict(status, **(fields | kw))


def make_outcome(ready_s: float | None = 41.5) -> ProbeOutcome:
    """A probe outcome with one passing and one failing probe."""
    probes = (
        ProbeResult("greedy", True, latency_s=0.2, tokens=8, text_excerpt="Paris", request={"temperature": 0}),
        ProbeResult("sampled", False, latency_s=0.1, error="HTTP 500", request={"temperature": 0.7}),
    )
    return ProbeOutcome(reached_ready=ready_s is not None, ready_s=ready_s, probes=probes, exit_code=None)


def make_run(cell: Cell, attempt: int = 1, sweep_id: str = "s-20261202-153012-ab12", **kw: Any) -> RunRecord:
    """A pending run of `cell`."""
    fields: dict[str, Any] = {
        "run_id": new_run_id(),
        "sweep_id": sweep_id,
        "cell_id": cell.cell_id,
        "attempt": attempt,
        "host": "sim",
        "command": "python -m sglang.launch_server --attention-backend triton",
        "env_masked": {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": MASK},
        "started_at": 1_800_000_100.0,
    }
    return RunRecord(**(fields | kw))


def test_sweep_ids_are_readable_sortable_and_unique() -> None:
    first, later = new_sweep_id(1_800_000_000.0), new_sweep_id(1_800_000_061.0)
    assert re.fullmatch(r"s-\d{8}-\d{6}-[0-9a-f]{4}", first)
    assert first[:-5] == "s-20270115-080000"  # UTC
    assert first[:-5] < later[:-5]


def test_run_ids_are_short_and_unique() -> None:
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"r-[0-9a-f]{10}", i) for i in ids)


def test_sweep_row_round_trip() -> None:
    record = make_sweep(ended_at=1_800_000_500.0, status="done")
    assert SweepRecord.from_row(record.to_row()) == record


def test_run_row_round_trip_with_everything_set() -> None:
    cell = make_cell()
    record = make_run(
        cell,
        state="done",
        run_dir="/work/runs/r-1",
        pgid=4242,
        port=30001,
        gpus=(0, 1, 2, 3),
        ended_at=1_800_000_200.0,
        timings={"model_load": 30.5, "ready": 41.5},
        outcome=make_outcome(),
        evidence={"warnings": ["DeepGemm is enabled but ..."], "tracebacks": [], "markers": ["ready"]},
        verdict=make_verdict(),
        install="nightly",
    )
    assert RunRecord.from_row(record.to_row()) == record
    assert record.ready_s == 41.5


def test_cell_row_keeps_only_env_names() -> None:
    cell = make_cell(env={"HF_TOKEN": "hf_live_value", "SGLANG_X": "1"}, install="nightly")
    row = cell_to_row("s-1", 0, cell)
    assert "hf_live_value" not in str(row)
    back = cell_from_row(row)
    assert back.env == {"HF_TOKEN": MASK, "SGLANG_X": MASK}
    assert (back.cell_id, back.flags, back.axes, back.install) == (cell.cell_id, cell.flags, cell.axes, cell.install)


def test_unexpected_state_in_a_row_is_a_store_error() -> None:
    row = make_run(make_cell()).to_row() | {"state": "exploded"}
    with pytest.raises(StoreError, match="run state"):
        RunRecord.from_row(row)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("api-key", True),
        ("admin-api-key", True),
        ("DB_PASSWORD", True),
        ("max_new_tokens", False),
        ("skip-tokenizer-init", False),
        ("SGLANG_ENABLE_JIT_DEEPGEMM", False),
        ("kv-cache-dtype", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_abc python -m x", "HF_TOKEN=*** python -m x"),
        ("export OPENAI_API_KEY='sk-1 2'", "export OPENAI_API_KEY='***'"),
        ("env:\n  HF_TOKEN: hf_abc\n", "env:\n  HF_TOKEN: ***\n"),
        ("--api-key sk-123 --port 30000", "--api-key *** --port 30000"),
        ("--admin-api-key=sk-123", "--admin-api-key=***"),
        ("ServerArgs(api_key='sk-1', max_new_tokens=8)", "ServerArgs(api_key='***', max_new_tokens=8)"),
        ("ServerArgs(api_key=None)", "ServerArgs(api_key=None)"),
        ("HF_TOKEN: ${HF_TOKEN}", "HF_TOKEN: ${HF_TOKEN}"),
        ("json.decoder: Unexpected token: foo", "json.decoder: Unexpected token: foo"),
        ("--max-total-tokens 4096", "--max-total-tokens 4096"),
    ],
)
def test_scrub_text(text: str, expected: str) -> None:
    assert scrub_text(text) == expected
    assert scrub_text(expected) == expected


def test_scrub_masks_nested_keys_but_keeps_flags_and_types() -> None:
    value = {"env": {"HF_TOKEN": "hf_x", "N": 1}, "api-key": True, "list": ["HF_TOKEN=hf_y"], "max_new_tokens": 8}
    assert scrub(value) == {
        "env": {"HF_TOKEN": MASK, "N": 1},
        "api-key": True,
        "list": ["HF_TOKEN=***"],
        "max_new_tokens": 8,
    }
