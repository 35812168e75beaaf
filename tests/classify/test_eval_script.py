"""The classifier scored the honest way: floors on every labelled set of real logs, not answers per file.

Uses scripts/eval_classify.py (the same figures `scripts/eval-classify DIR...` prints) over the shared
fixtures and the real logs gathered into tests/data/real-logs/.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from types import ModuleType

from tests.paths import CRASH_LOGS, REPO, require_fixtures

require_fixtures()

REAL_LOGS = REPO / "tests" / "data" / "real-logs"
CATEGORIES = {
    "invalid_argument", "unsupported_config", "import_error", "cuda_oom", "kv_cache_too_small", "cuda_device_assert",
    "nan_in_probs", "illegal_memory_access", "nccl_error", "cuda_graph_capture_failed",
    "kernel_not_supported_on_arch", "weights_load_error", "hang_or_timeout", "tokenizer_or_template_error",
    "port_in_use", "process_killed", "kernel_jit_error", "gpu_memory_in_use", "warmup_request_failed",
    "wrong_output", "python_exception_other", "unknown", "healthy",
}  # fmt: skip


def _eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_classify", REPO / "scripts" / "eval_classify.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_classify"] = module
    spec.loader.exec_module(module)
    return module


def test_real_logs_are_labelled_in_the_fixture_format() -> None:
    ev = _eval()
    labels = ev.labels_of(REAL_LOGS)
    assert {p.stem for p in REAL_LOGS.glob("*.log")} == {label["id"] for label in labels}
    sources = [label["source"] for label in labels]
    fixture_sources = {label["source"] for label in ev.labels_of(CRASH_LOGS)}
    assert len(set(sources)) == len(sources) and not set(sources) & fixture_sources
    for label in labels:
        assert label["category"] in CATEGORIES, label["id"]
        assert "#" in label["source"] and label["notes"], label["id"]
        lines = (REAL_LOGS / f"{label['id']}.log").read_text(encoding="utf-8", errors="replace").split("\n")
        # A healthy log may designate no line (as the shared fixtures do): a healthy verdict is then all it asks.
        # A designated line is quoted from one line of the log, whole or without its prefix (taxonomy.md).
        root = label["root_cause_line"]
        assert (root is None and label["category"] == "healthy") or (
            bool(root and root.strip()) and any(root in line for line in lines)), label["id"]


def test_floors_on_every_labelled_set() -> None:
    ev = _eval()
    scored = ev.score_folder(CRASH_LOGS) + ev.score_folder(REAL_LOGS)
    figures = ev.figures(scored)
    assert figures["logs"] >= 40
    # The floors are what the rules reach on every labelled set (scripts/eval-classify), set when batches 32v..32y had
    # landed and rules had read the fitting part's misses: category 0.932, root line 0.958 on 950 logs.
    assert figures["category_accuracy"] >= 0.93, figures
    assert figures["root_cause_line"] >= 0.95, figures
    # Healthy logs called failures, four, all in the fitting part: two disaggregated servers whose KV transfer fails per
    # request (a NIXL engine-ID mismatch, Mooncake store puts failing with RPC_FAIL) and recompute the prompt, where
    # only the logger's file says the failure was one request's (tests/knowledge/test_request_and_prefix_families.py);
    # and two SGLang-on-Ascend performance tests whose server served every request before the test's own unittest
    # assertion on throughput/TPOT failed (a test's threshold on a figure reads the same as an accuracy threshold,
    # which would be wrong output). Servers stopped from outside after serving are healthy since classify/survival.py
    # reads the stop (tests/classify/test_outside_stop.py). A fifth came with batch 32z2: a vLLM server that refused
    # over-long prompts with VLLMValidationError tracebacks, each answered 400, then shut down cleanly; the 400 answers
    # are not in the evidence the classifier reads (its serving activity counts only 200s and batches), so the
    # tracebacks read as the end. The floor follows the data (5), it does not excuse them.
    assert figures["healthy_false_alarms"] <= 5, figures
    # Failures read as healthy: seven, five in the checking part, which no rule may be written against; the fitting
    # part's are a hang whose only sign is /health answering 503 and a vLLM refusal quoted wrapped over indented
    # lines. The floor guards against more.
    assert figures["missed_failures"] <= 7, figures


def test_the_script_prints_the_figures(capsys: object) -> None:
    ev = _eval()
    assert ev.main([str(CRASH_LOGS), "--json"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    doc = json.loads(out)
    assert {"category_accuracy", "root_cause_line", "healthy_false_alarms", "confusion"} <= set(doc)


def test_split_is_a_stable_hash_of_the_source_about_one_quarter_checking() -> None:
    ev = _eval()
    sources = [f"owner/repo#{n}" for n in range(2000)]
    parts = [ev.part_of(s) for s in sources]
    assert parts == [ev.part_of(s) for s in sources]
    assert set(parts) == {"checking", "fitting"}
    assert 0.20 <= parts.count("checking") / len(parts) <= 0.30
    # Surrounding whitespace is no other source.
    assert ev.part_of(" owner/repo#7 ") == ev.part_of("owner/repo#7")


def test_also_ok_counts_as_right() -> None:
    ev = _eval()
    scored = ev.Scored("s", "x", "hang_or_timeout", "nccl_error", "a", "a", "o/r#1", ("nccl_error",))
    assert scored.category_ok
    assert not ev.Scored("s", "x", "hang_or_timeout", "nccl_error", "a", "a", "o/r#1").category_ok


def test_split_prints_one_line_per_part(capsys: object) -> None:
    ev = _eval()
    assert ev.main(["--split", str(CRASH_LOGS), str(REAL_LOGS)]) == 0
    out = capsys.readouterr().out.splitlines()  # type: ignore[attr-defined]
    pattern = (r"^(checking|fitting): category_accuracy=\d\.\d\d root_cause_line=\d\.\d\d healthy_false_alarms=\d+ "
               r"similar_precision=(?:\d\.\d\d|n/a) \(n=\d+\+\d+ healthy\)$")
    assert [re.match(pattern, line).group(1) for line in out[:2]] == ["checking", "fitting"]  # type: ignore[union-attr]


def test_floors_on_the_checking_part() -> None:
    # The honest estimate: logs whose misses no rule was written against (scripts/eval-classify --split).
    ev = _eval()
    scored = [s for d in ev.DEFAULT_DIRS if d.is_dir() for s in ev.score_folder(d)]
    checking = ev.figures(ev.split(scored)["checking"])
    assert checking["logs"] >= 50
    # Issue 32's target is 0.90 for all three; these floors guard what the checking part has reached (category
    # 0.841, root line 0.897, similar 0.919, no healthy false alarm on 203 failing + 49 healthy logs once batches
    # 32v..32y had landed, scripts/eval-classify --split); the checking part is never tuned on. It overstates what
    # unseen logs get: batches gathered after the rules were written scored 0.5-0.73 before any rule saw them
    # (labels-issue32*.jsonl's commits), since the checking logs come from the same searches, so the same kinds, as
    # the fitting ones. Healthy false alarms: back to 0 since servers stopped from outside after serving (an
    # EngineDeadError after a requested '[shutdown]') read as the end of the run (classify/survival.py), a rule written
    # from the fitting part's such logs.
    assert checking["healthy_false_alarms"] <= 0, checking
    assert checking["root_cause_line"] >= 0.89, checking
    assert checking["category_accuracy"] >= 0.83, checking
    # Was 0.93; batches 32v..32y brought checking logs whose nearest shipped neighbour names another category: 0.905
    # (158 shown) with the shipped evidence regenerated from every labelled log through 32y2. The floor is the
    # issue's own target, 0.90, which that just meets.
    assert checking["similar_precision"] >= 0.90, checking


def test_a_healthy_label_without_a_line_is_found_by_a_healthy_verdict() -> None:
    ev = _eval()
    assert ev.Scored("s", "x", "healthy", "healthy", None, "[ts] ready", "o/r#1").root_ok
    assert not ev.Scored("s", "x", "healthy", "cuda_oom", None, "OOM", "o/r#1").root_ok
    assert not ev.Scored("s", "x", "cuda_oom", "cuda_oom", None, "OOM", "o/r#1").root_ok


def test_a_labelled_line_is_found_within_the_line_reported_whatever_its_prefix() -> None:
    # taxonomy.md: the root-cause line is matched as a substring, whatever the prefix of the line found.
    ev = _eval()
    found = "(Worker pid=7) ERROR 01-01 00:00:00 [core.py:9] ValueError: max_model_len is larger than the derived one"
    assert ev.Scored("s", "x", "invalid_argument", "invalid_argument",
                     "ValueError: max_model_len is larger than the derived one", found, "o/r#1").root_ok
    assert ev.Scored("s", "x", "invalid_argument", "invalid_argument", found, found, "o/r#1").root_ok
    assert not ev.Scored("s", "x", "invalid_argument", "invalid_argument",
                         "ValueError: max_model_len is larger than the derived one",
                         "[core.py:9] Traceback (most recent call last):", "o/r#1").root_ok
    assert not ev.Scored("s", "x", "invalid_argument", "invalid_argument", "   ", found, "o/r#1").root_ok
