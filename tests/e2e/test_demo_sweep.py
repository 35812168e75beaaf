"""The demo's sweep, as `scripts/demo` runs it: the incident's matrix on the simulated host, cell by cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import Store
from tests.paths import REPO
from tests.simhost import orchestrator, processes_under, sim_gpu_holders, write_hosts

DEEPGEMM_WARNING = "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0"


def expected(flags: dict[str, Any]) -> tuple[str, str | None, str]:
    """The incident's verdict for one cell (DESIGN.md, "The simulated host")."""
    fp8_kv = flags["kv-cache-dtype"] == "fp8_e4m3"
    if flags["attention-backend"] == "triton" and fp8_kv:
        return "fail", "memory_alloc", "unsupported_config"
    if flags["fp8-gemm-backend"] in ("auto", "deep_gemm"):
        return "fail", "sampled_decode", "nan_in_probs"
    if flags["attention-backend"] in ("nsa", "dsa") and flags["dsa-decode-backend"] == "flashmla_sparse" and fp8_kv:
        return "fail", "sampled_decode", "illegal_memory_access"
    return "pass", "after_decode", "healthy"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One run of the demo matrix on a simulated host with its own workdir and store."""
    tmp = tmp_path_factory.mktemp("demo")
    hosts = write_hosts(tmp / "hosts.yaml", tmp / "work")
    db = tmp / "demo.db"
    result = orchestrator(
        "sweep", str(REPO / "configs" / "glm5-nvfp4-sm120.yaml"), "--host", "simhost", "--hosts", str(hosts),
        "--json-out", str(tmp / "table.json"), db=db, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((tmp / "table.json").read_text()), tmp


def test_every_cell_gets_the_incidents_verdict(demo: tuple[dict[str, Any], Path]) -> None:
    table, _ = demo
    assert len(table["cells"]) == 30
    wrong = []
    for cell in table["cells"]:
        got = (cell["status"], cell["phase"], cell["category"])
        if got != expected(cell["flags"]):
            wrong.append((cell["flags"], got, expected(cell["flags"])))
    assert wrong == []


def test_nan_cells_pass_greedy_and_carry_the_startup_warning(demo: tuple[dict[str, Any], Path]) -> None:
    table, tmp = demo
    with Store(tmp / "demo.db") as store:
        for cell in table["cells"]:
            if cell["category"] != "nan_in_probs":
                continue
            run = store.get_run(cell["run_id"])
            assert run.outcome is not None
            probes = {p.name: p for p in run.outcome.probes}
            assert probes["greedy"].ok and not probes["sampled"].ok
            warnings = [w["text"] for w in (run.evidence or {}).get("warnings", [])]
            assert any(DEEPGEMM_WARNING in w for w in warnings)


def test_explain_names_the_fp8_gemm_backend_and_the_warning(demo: tuple[dict[str, Any], Path]) -> None:
    _, tmp = demo
    result = orchestrator("explain", "--format", "json", db=tmp / "demo.db")
    assert result.returncode == 0, result.stderr
    findings = [f for f in json.loads(result.stdout)["findings"] if f["category"] == "nan_in_probs"]
    first = findings[0]
    assert first["kind"] == "flag"
    assert {k: sorted(v) for k, v in first["flags"].items()} == {"fp8-gemm-backend": ["auto", "deep_gemm"]}
    assert first["fail_with"] == first["fail_total"] and first["pass_with"] == 0
    warning = next(f for f in findings if f["kind"] == "warning")
    assert DEEPGEMM_WARNING in warning["warning"]
    counts = ("fail_with", "fail_total", "pass_with", "pass_total")
    assert [warning[k] for k in counts] == [first[k] for k in counts]


def test_the_host_is_left_clean(demo: tuple[dict[str, Any], Path]) -> None:
    _, tmp = demo
    assert processes_under(tmp / "work") == []
    assert sim_gpu_holders(tmp / "work") == []
