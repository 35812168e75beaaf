"""`orchestrator report`: the HTML page (escaping, cells, facets, axis choice, compare marks) and the Markdown comment.

The data is a real six-cell sweep on the simulated host (tests/report/test_html.small_sweep), whose
root-cause line and warning carry `<`, `>`, `&`, quotes, backticks and a literal `</script>`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.analysis.explain import Explanation
from orchestrator.cli import app
from orchestrator.cli.report import COMMENT_MAX, markdown_report
from orchestrator.model import Category, Status
from orchestrator.report.heatmap import choose_axes, layout
from orchestrator.report.html import render_html, script_json
from orchestrator.store import CellResult, Store, SweepRecord
from tests.simhost import random_port_base

NASTY = 'ValueError: <triton> can\'t serve "fp8" KV `nsa_kv_cache_store_fp8` </script><b>bold</b> & more'
WARNING = 'DeepGemm is enabled but scale_fmt is not <ue8m0> & "quoted". This might cause accuracy degradation.'
SCENARIO = {
    "version": "0.5.9",
    "gpus": 8,
    "gpu": {"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "memory_mib": 97887, "compute_capability": "12.0"},
    "packages": {"sglang": "0.5.9", "torch": "2.9.1", "flashinfer-python": "0.5.3"},
    "model": {"architecture": "GlmMoeDsaForCausalLM", "model_type": "glm_moe_dsa", "weights_gib": 16},
    "timing": {"import_s": 0.02, "init_s": 0.02, "load_weights_s": 0.05, "memory_alloc_s": 0.02, "warmup_s": 0.02},
    "rules": [
        {
            "when": {"fp8-gemm-backend": "deep_gemm"},
            "warn": WARNING,
            "fail": {"at": "sampled_decode", "kind": "nan_in_probs"},
        },
        {
            "when": {"attention-backend": "triton", "kv-cache-dtype": "fp8_e4m3"},
            "fail": {"at": "memory_alloc", "kind": "unsupported_config", "message": NASTY},
        },
    ],
}
MATRIX = {
    "name": "report-test",
    "flags": {"model-path": "/models/tiny", "tp-size": 1},
    "env": {"HF_TOKEN": {"secret": "ORCH_REPORT_TEST_TOKEN"}},
    "matrix": {
        "attention-backend": ["flashinfer", "triton"],
        "fp8-gemm-backend": ["deep_gemm", "cutlass"],
        "kv-cache-dtype": ["fp8_e4m3", "bf16"],
        "exclude": [{"attention-backend": "triton", "kv-cache-dtype": "bf16"}],
    },
}
TOKEN = "hf_reportTestSecret0123456789"
"""The value of the matrix's one secret: it must never reach the store or a report."""
DEADLINES = {"model_load": "4s", "memory_alloc": "4s", "ready": "10s", "probe": "8s", "stop_grace": "2s"}


def small_sweep(root: Path) -> Path:
    """Run the six-cell sweep on a simulated host of its own (own workdir, GPU state and ports); returns the db."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    (root / "matrix.yaml").write_text(yaml.safe_dump(MATRIX, sort_keys=False))
    host = {
        "transport": "sim",
        "scenario": str(root / "scenario.yaml"),
        "workdir": str(root / "work"),
        "deadlines": DEADLINES,
        # Test sessions running side by side must not race each other for one port.
        "port_base": random_port_base(),
    }
    (root / "hosts.yaml").write_text(yaml.safe_dump({"reporthost": host}))
    db = root / "x.db"
    args = ["sweep", str(root / "matrix.yaml"), "--host", "reporthost", "--hosts", str(root / "hosts.yaml")]
    result = CliRunner().invoke(app, [*args, "--db", str(db)], env={"ORCH_REPORT_TEST_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    return db


def load(db: Path) -> tuple[SweepRecord, list[CellResult]]:
    """The latest sweep in a store and its cells."""
    with Store(db, create=False) as store:
        record = store.resolve_sweep(None)
        return record, store.cell_results(record.sweep_id)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_sweep(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def sweep(db: Path) -> tuple[SweepRecord, list[CellResult]]:
    return load(db)


def page_data(page: str) -> dict[str, object]:
    """The JSON block the page's script reads."""
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert match, "no data block"
    data: dict[str, object] = json.loads(match.group(1))
    return data


def test_the_sweep_has_what_the_page_must_show(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    assert len(results) == 6
    assert sorted(r.status.value for r in results if r.status) == ["fail"] * 4 + ["pass"] * 2
    assert sum(r.root_cause_line == NASTY for r in results) == 2


def test_log_text_never_becomes_markup(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    page = render_html(*sweep)
    assert "<b>bold</b>" not in page and "<triton>" not in page and "<ue8m0>" not in page
    assert TOKEN not in page
    assert page.count("</script>") == 2, "only the data block and the script itself may close a script"
    assert "&lt;triton&gt; can&#x27;t serve &quot;fp8&quot;" in page
    cells = page_data(page)["cells"]
    assert isinstance(cells, list)
    assert NASTY in [c["root"] for c in cells]
    assert any(WARNING in c["warnings"] for c in cells)
    assert {c["env"].get("HF_TOKEN") for c in cells} == {"***"}, "the secret is shown masked, never dropped"


def test_script_json_round_trips_and_hides_markup() -> None:
    text = script_json({"line": "</script><!-- & \u2028"})
    assert not set("<>&") & set(text) and "\u2028" not in text
    assert json.loads(text) == {"line": "</script><!-- & \u2028"}


def test_one_button_per_cell_and_gaps_where_the_matrix_excludes(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    page = render_html(*sweep)
    assert len(re.findall(r'<button type="button" class="cell[^"]*" data-cell="\d+"', page)) == 6
    assert page.count('class="empty"') == 2, "triton x bf16 is excluded: its row of the bf16 grid stays empty"
    assert len(page_data(page)["cells"]) == 6  # type: ignore[arg-type]


def test_default_axes_are_the_flags_the_findings_name(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    page = render_html(*sweep)
    assert "columns: fp8-gemm-backend (a top finding names it)" in page
    assert "rows: attention-backend (a top finding names it)" in page
    assert page.count('<table class="grid" ') == 2, "one facet per kv-cache-dtype"
    assert 'aria-label="kv-cache-dtype=bf16"' in page


def test_chosen_axes_and_their_facets(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    record, results = sweep
    page = render_html(record, results, x="kv-cache-dtype", y="attention-backend")
    assert "columns: kv-cache-dtype (--x) · rows: attention-backend (--y) · one grid per fp8-gemm-backend" in page
    grid = layout(results, "kv-cache-dtype", "attention-backend")
    assert [f.title for f in grid.facets] == ["fp8-gemm-backend=deep_gemm", "fp8-gemm-backend=cutlass"]
    assert sum(len(f.cells) for f in grid.facets) == 6
    with pytest.raises(ValueError, match="no axis 'nope'"):
        render_html(record, results, x="nope")
    with pytest.raises(ValueError, match="two different axes"):
        render_html(record, results, x="kv-cache-dtype", y="kv-cache-dtype")


def test_without_findings_the_axes_with_most_values_win(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    nothing = Explanation("s", (), (), 0, 0)
    assert choose_axes(results, nothing)[:2] == ("attention-backend", "fp8-gemm-backend")
    assert choose_axes(results, nothing, y="attention-backend")[:2] == ("fp8-gemm-backend", "attention-backend")
    one = layout(results[:1], None, None)
    assert one.columns == ("",) and one.rows == ("",) and len(one.facets) == 1


def _flipped(results: Sequence[CellResult]) -> list[CellResult]:
    """A baseline in which the first passing cell failed and the first nan_in_probs cell passed."""
    passed = next(r for r in results if r.status is Status.PASS)
    nan = next(r for r in results if r.category is Category.NAN_IN_PROBS)
    flipped = {
        passed.cell.cell_id: dict(status=Status.FAIL, category=Category.CUDA_OOM, root_cause_line="OutOfMemoryError"),
        nan.cell.cell_id: dict(status=Status.PASS, category=Category.HEALTHY, root_cause_line=None),
    }
    return [dataclasses.replace(r, **flipped.get(r.cell.cell_id, {})) for r in results]  # type: ignore[arg-type]


def test_compare_marks_regressions_and_fixes(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    record, results = sweep
    base = dataclasses.replace(record, sweep_id="s-20260101-000000-base")
    page = render_html(record, results, baseline=(base, _flipped(results)))
    assert page.count('<span class="badge">▼ regressed</span>') == 1
    assert page.count('<span class="badge">▲ fixed</span>') == 1
    assert "Against baseline" in page and "s-20260101-000000-base" in page
    marks = [c["mark"] for c in page_data(page)["cells"] if c["mark"]]  # type: ignore[attr-defined]
    assert sorted(m["kind"] for m in marks) == ["fix", "regression"]
    assert {m["before"]["status"] for m in marks} == {"pass", "fail"}


def test_cli_writes_the_page_and_the_comment(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    sweep_id = load(db)[0].sweep_id
    args = ["report", "--html", str(out), "--md", "--compare", sweep_id, "--db", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>") and "Against baseline" in out.read_text()
    assert result.output.index("Why cells fail") < result.output.index("Compare") < result.output.index("| attention-")
    bad = CliRunner().invoke(app, ["report", "--db", str(db)])
    assert bad.exit_code == 2 and "--html FILE, --md" in bad.output


def test_unfinished_and_empty_sweeps_still_render(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    record, results = sweep
    unfinished = [dataclasses.replace(r, status=None, runs=(), run_id=None) for r in results]
    page = render_html(record, unfinished)
    assert "6 not run" in page and len(page_data(page)["cells"]) == 6  # type: ignore[arg-type]
    assert "0 cells" in render_html(record, [])


def test_the_comment_fits_github(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    record, results = sweep
    many = [
        dataclasses.replace(r, cell=dataclasses.replace(r.cell, cell_id=f"{r.cell.cell_id}{i}"))
        for i in range(200)
        for r in results
    ]
    text = markdown_report(record, many)
    assert len(text) <= COMMENT_MAX
    assert "more cells not shown" in text and text.startswith("**Why cells fail**")
