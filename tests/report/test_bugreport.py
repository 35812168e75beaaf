"""`orchestrator bugreport RUN`: Markdown for an SGLang issue, from a real six-cell sweep on the simulated host."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.model import Category, Status
from orchestrator.report.bugreport import BODY_MAX, fence, neighbours, render_bugreport, trim_traceback
from orchestrator.store import CellResult, Store, SweepRecord
from tests.report.test_html import NASTY, TOKEN, WARNING, load, small_sweep


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_sweep(tmp_path_factory.mktemp("bugreport"))


@pytest.fixture(scope="module")
def sweep(db: Path) -> tuple[SweepRecord, list[CellResult]]:
    return load(db)


def _cell(results: list[CellResult], **flags: str) -> CellResult:
    return next(r for r in results if all(r.cell.flags.get(k.replace("_", "-")) == v for k, v in flags.items()))


def bugreport(db: Path, run_id: str) -> str:
    result = CliRunner().invoke(app, ["bugreport", run_id, "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_sampled_decode_failure_as_an_issue(db: Path, sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    nan = _cell(results, attention_backend="flashinfer", fp8_gemm_backend="deep_gemm", kv_cache_dtype="fp8_e4m3")
    assert nan.category is Category.NAN_IN_PROBS and nan.run_id
    text = bugreport(db, nan.run_id[:8])
    assert len(text) < BODY_MAX
    for heading in ("### Describe the bug", "#### What happened", "#### Root-cause line", "#### First traceback",
                    "#### Warnings in the log", "#### What was sent", "#### Neighbouring configurations",
                    "### Reproduction", "### Environment"):  # fmt: skip
        assert heading in text
    assert "| SGLang | `0.5.9` |" in text and "| torch | `2.9.1` |" in text
    assert "NVIDIA RTX PRO 6000 Blackwell Server Edition" in text
    assert "--fp8-gemm-backend deep_gemm" in text and "HF_TOKEN=***" in text and TOKEN not in text
    assert "probe `sampled` error:" in text and "**fail** at phase `sampled_decode`, category `nan_in_probs`" in text
    sent = text.split("#### What was sent")[1].split("####")[0]
    assert "The `sampled` probe `POST /v1/chat/completions`" in sent and '"temperature": 0.7' in sent
    assert "Sent before it, with good answers" in sent and "`greedy`" in sent
    trace = text.split("#### First traceback")[1].split("####")[0]
    assert "Traceback (most recent call last)" in trace and "RuntimeError: probability tensor" in trace
    assert text.count(WARNING) == 1, "warnings are listed once"
    assert "| `--fp8-gemm-backend` | `deep_gemm` | `cutlass` |" in text
    assert "<details><summary>" in text and "#!/usr/bin/env bash" in text and text.count("</details>") == 1


def test_a_startup_failure_sent_nothing(db: Path, sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    crash = _cell(results, attention_backend="triton", fp8_gemm_backend="cutlass", kv_cache_dtype="fp8_e4m3")
    assert crash.run_id and crash.root_cause_line == NASTY
    text = bugreport(db, crash.run_id)
    assert "Nothing: the server never became ready (it stopped at `memory_alloc`)" in text
    # The root-cause line's backticks cannot close its code block early.
    assert fence(NASTY, "text") in text
    assert "| `--attention-backend` | `triton` | `flashinfer` |" in text


def test_neighbours_differ_in_exactly_one_flag(sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    lonely = _cell(results, attention_backend="triton", fp8_gemm_backend="deep_gemm")
    assert neighbours(lonely.cell, results) == []
    passing = [r for r in results if r.status is Status.PASS]
    assert neighbours(passing[0].cell, results) == [
        ("kv-cache-dtype", passing[0].cell.flags["kv-cache-dtype"], passing[1].cell.flags["kv-cache-dtype"])
    ]


def test_a_traceback_keeps_the_frames_nearest_the_exception() -> None:
    frames = [line for i in range(12) for line in (f'  File "/x/m{i}.py", line {i}, in f{i}', f"    call{i}()")]
    lines = ["Traceback (most recent call last):", *frames, "ValueError: boom"]
    trimmed = trim_traceback(lines, keep_frames=4)
    assert trimmed[0] == lines[0] and trimmed[-1] == "ValueError: boom"
    assert "8 outer frames (16 lines) omitted" in trimmed[1]
    assert [t for t in trimmed if t.lstrip().startswith("File")] == [frames[i] for i in range(16, 24, 2)]
    assert trim_traceback(lines[:7] + lines[-1:], keep_frames=4) == lines[:7] + lines[-1:]


def test_fences_outlast_backticks_in_the_text() -> None:
    assert fence("a ``` b", "text") == "````text\na ``` b\n````"
    assert fence("plain") == "```\nplain\n```"


def test_an_unknown_run_is_a_clear_error(db: Path) -> None:
    result = CliRunner().invoke(app, ["bugreport", "r-nope", "--db", str(db)])
    assert result.exit_code == 1 and "r-nope" in result.output


def test_the_same_run_gives_the_same_text(sweep: tuple[SweepRecord, list[CellResult]], db: Path) -> None:
    record, results = sweep
    with Store(db, create=False) as store:
        run = store.get_run(results[0].run_id or "")
    assert render_bugreport(run, record, results) == render_bugreport(run, record, results)
    assert re.search(r"Written by orchestrator from run `r-[0-9a-f]+`", render_bugreport(run, record, results))


def test_a_passing_run_has_no_bug_to_report(db: Path, sweep: tuple[SweepRecord, list[CellResult]]) -> None:
    _, results = sweep
    passed = next(r for r in results if r.status is Status.PASS)
    assert passed.run_id is not None
    result = CliRunner().invoke(app, ["bugreport", passed.run_id, "--db", str(db)])
    assert result.exit_code == 1, result.output
    assert f"run {passed.run_id} passed" in result.output and "[Bug]" not in result.output
    assert "orchestrator table" in result.output  # where the failing runs are
