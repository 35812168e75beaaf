"""`orchestrator classify PATH... [--json]`: the JSON contract, the human report, several logs, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.cli import classify as cli_classify
from tests.paths import CRASH_LOGS, require_fixtures

require_fixtures()

runner = CliRunner()


def test_json_contract_on_a_real_crash_log() -> None:
    log = CRASH_LOGS / "sglang-5491-eagle-flashinfer-illegal-memory-access.log"
    result = runner.invoke(app, ["classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in (
        "status",
        "category",
        "phase",
        "root_cause_line",
        "reason",
        "first_error",
        "warnings",
        "tracebacks",
        "markers",
        "resolved",
        "deprecations",
        "versions",
        "cuda_errors",
    ):
        assert key in doc
    assert (doc["status"], doc["category"], doc["phase"]) == ("fail", "illegal_memory_access", "serving")
    assert doc["root_cause_line"] in log.read_text().splitlines()
    assert doc["root_cause_line_no"] == 1
    assert doc["tracebacks"][0]["lines"][0].endswith("Scheduler hit an exception: Traceback (most recent call last):")


def test_json_warnings_are_strings_with_their_counts_beside(tmp_path: Path) -> None:
    # DESIGN's contract: `warnings` is a list of strings; each one's count and first sighting are `warning_details`.
    log = tmp_path / "server.log"
    warning = "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause accuracy degradation."
    log.write_text(
        f"[2026-01-05 10:00:00 TP0] {warning}\n[2026-01-05 10:00:01 TP1] {warning}\n"
        "[2026-01-05 10:00:02] Attention backend not specified. Use trtllm_mha backend by default.\n"
        "[2026-01-05 10:00:03] The server is fired up and ready to roll!\n"
    )
    doc = json.loads(runner.invoke(app, ["classify", "--json", str(log)]).stdout)
    assert doc["warnings"] == [warning]
    assert doc["warning_details"] == [{"text": warning, "count": 2, "first_seen": "2026-01-05 10:00:00", "line_no": 1}]
    assert doc["resolved"] == {"attention_backend": "trtllm_mha"}
    assert [m["name"] for m in doc["markers"]] == ["ready"]
    assert (doc["category"], doc["phase"]) == ("healthy", "ready")


def test_human_report_shows_the_cause_in_context() -> None:
    log = CRASH_LOGS / "llm-compressor-959-vllm-keyerror-weight-scale.log"
    result = runner.invoke(app, ["classify", str(log)])
    assert result.exit_code == 0
    out = result.stdout
    assert "weights_load_error" in out and "model_load" in out
    assert "root cause, line 9" in out
    assert "KeyError: 'layers.0.mlp.down_proj.weight_scale'" in out
    assert "first traceback" in out


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["classify", str(tmp_path / "missing.log")])
    assert result.exit_code == 2
    assert "cannot read" in result.output
    empty = runner.invoke(app, ["classify", str(tmp_path)])
    assert empty.exit_code == 2 and "no log files" in empty.output


def test_a_failure_category_still_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"usage: sglang serve [-h]\nsglang serve: error: unrecognized arguments: --bogus 1\n")
    result = runner.invoke(app, ["classify", "--json", str(log)])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "invalid"


def test_large_file_is_read_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_classify, "CHUNK", 4096)
    log = tmp_path / "server.log"
    decode = "[2026-01-05 10:00:00 TP0] Decode batch. #running-req: 3, #token: 14, gen throughput (token/s): 2.5\n"
    with log.open("w") as f:
        f.write("[2026-01-05 09:59:00] The server is fired up and ready to roll!\n")
        f.write(decode * 20000)
        f.write("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
        f.write(decode * 10)
    doc = json.loads(runner.invoke(app, ["classify", "--json", str(log)]).stdout)
    assert (doc["category"], doc["phase"], doc["root_cause_line_no"]) == ("illegal_memory_access", "serving", 20002)
    around = cli_classify.lines_around(log, 20002, radius=2)
    assert [n for n, _ in around] == [20000, 20001, 20002, 20003, 20004]
    assert around[2][1].startswith("torch.AcceleratorError")


def test_several_logs_and_a_folder_give_one_json_object_per_line(tmp_path: Path) -> None:
    logs = sorted(CRASH_LOGS.glob("*.log"))[:3]
    folder = tmp_path / "night"
    (folder / "cell-a").mkdir(parents=True)
    (folder / "cell-a" / "server.log").write_bytes(logs[0].read_bytes())
    (folder / "notes.md").write_text("not a log")
    result = runner.invoke(app, ["classify", "--json", str(logs[1]), str(logs[2]), str(folder)])
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["file"] for d in docs] == [str(logs[1]), str(logs[2]), str(folder / "cell-a" / "server.log")]
    for doc in docs:
        assert {"category", "phase", "root_cause_line", "evidence", "warnings", "tracebacks", "markers"} <= set(doc)


def test_a_missing_file_among_several_exits_2_after_classifying_the_rest(tmp_path: Path) -> None:
    log = CRASH_LOGS / "vllm-569-failed-to-load-tokenizer.log"
    result = runner.invoke(app, ["classify", "--json", str(tmp_path / "gone.log"), str(log)])
    assert result.exit_code == 2
    assert "cannot read" in result.output
    (doc,) = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert doc["category"] == "tokenizer_or_template_error"


def test_json_says_why_and_the_human_report_shows_it() -> None:
    log = CRASH_LOGS / "llm-compressor-959-vllm-keyerror-weight-scale.log"
    doc = json.loads(runner.invoke(app, ["classify", "--json", str(log)]).stdout)
    evidence = doc["evidence"]
    assert evidence["exception_type"] == "KeyError"
    assert evidence["innermost_frame"].endswith("in load_weights")
    assert evidence["rule"]
    human = runner.invoke(app, ["classify", str(log)]).stdout
    assert f"decided by {evidence['rule']}" in human


def test_classify_imports_no_ssh_http_or_terminal_library() -> None:
    log = CRASH_LOGS / "vllm-569-failed-to-load-tokenizer.log"
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in ('paramiko', 'fabric', 'httpx', 'rich') if m in sys.modules),"
        " file=sys.stderr))\n"
        f"sys.argv = ['orchestrator', 'classify', '--json', {str(log)!r}]\n"
        "from orchestrator.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["category"] == "tokenizer_or_template_error"
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_similar_public_logs_in_json_and_one_line_in_the_report(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-01-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/layers/sampler.py", line 120, in forward\n'
        "    batch_next_token_ids = torch.multinomial(probs, num_samples=1)\n"
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0\n"
    )
    doc = json.loads(runner.invoke(app, ["classify", "--json", str(log)]).stdout)
    assert doc["similar"] and doc["similar"][0]["category"] == "nan_in_probs"
    first = doc["similar"][0]
    human = runner.invoke(app, ["classify", str(log)]).stdout.splitlines()
    said = [line for line in human if line.startswith("looks like ")]
    assert said == [f"looks like {first['source']}: {first['title']} (nan_in_probs, similarity {first['score']:.2f})"]


def test_a_healthy_log_has_no_similar(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-05 10:00:03] The server is fired up and ready to roll!\n")
    doc = json.loads(runner.invoke(app, ["classify", "--json", str(log)]).stdout)
    assert doc["similar"] == []
    human = runner.invoke(app, ["classify", str(log)]).stdout.splitlines()
    assert not any(line.startswith("looks like") for line in human)


def test_format_json_and_term_are_the_json_flag_and_the_report() -> None:
    log = CRASH_LOGS / "sglang-5491-eagle-flashinfer-illegal-memory-access.log"
    as_flag = runner.invoke(app, ["classify", str(log), "--json"])
    as_format = runner.invoke(app, ["classify", str(log), "--format", "json"])
    assert as_format.exit_code == 0 and as_format.stdout == as_flag.stdout
    assert json.loads(as_format.stdout)["category"] == "illegal_memory_access"
    report = runner.invoke(app, ["classify", str(log)])
    assert runner.invoke(app, ["classify", str(log), "-f", "term"]).stdout == report.stdout
    assert "category=illegal_memory_access" in report.stdout and not report.stdout.lstrip().startswith("{")
    both = runner.invoke(app, ["classify", str(log), "--json", "--format", "term"])
    assert both.exit_code == 2 and "--format term" in both.output
    assert runner.invoke(app, ["classify", str(log), "--format", "md"]).exit_code == 2


def test_an_empty_or_binary_file_is_not_called_a_healthy_log_without_saying_so(tmp_path: Path) -> None:
    empty, binary = tmp_path / "server.log", tmp_path / "core.log"
    empty.write_bytes(b"")
    binary.write_bytes(bytes(range(256)) * 40)
    said = CliRunner().invoke(app, ["classify", str(empty)])
    assert said.exit_code == 0 and "the file is empty" in said.output, said.output
    doc = json.loads(CliRunner().invoke(app, ["classify", str(empty), "--json"]).stdout)
    assert doc["notes"] == ["the file is empty: nothing was logged, so 'healthy' says nothing about the server"]
    said = CliRunner().invoke(app, ["classify", str(binary)])
    assert "not a text log" in said.output and "\x00" not in said.output, said.output
    doc = json.loads(CliRunner().invoke(app, ["classify", str(binary), "--json"]).stdout)
    assert any("not a text log" in note for note in doc["notes"])
    real = json.loads(
        CliRunner().invoke(app, ["classify", str(next(iter(sorted(CRASH_LOGS.rglob("*.log"))))), "--json"]).stdout
    )
    assert real["notes"] == []
