"""`similar`: the shipped public logs nearest to a failure, with no network, never a log's own source."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType

import pytest

from orchestrator.classify.similar import similar_to
from orchestrator.classify.verdict import classify
from orchestrator.harvest.evidence import extract_evidence
from orchestrator.harvest.read import read_evidence
from orchestrator.knowledge import public_logs
from orchestrator.knowledge.public_logs import Corpus, PublicLog, fingerprint, normalise, words
from orchestrator.report.bugreport import _looks_like
from tests.paths import REPO

SHIPPED_KEYS = {"source", "title", "category", "also_ok", "note", "exception_type", "cause", "frames", "fingerprint"}


def _eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_classify", REPO / "scripts" / "eval_classify.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_classify"] = module
    spec.loader.exec_module(module)
    return module


def _log(source: str, category: str, cause: str, etype: str | None = None, fp: str = "") -> PublicLog:
    return PublicLog(source, f"title of {source}", category, "note", words(normalise(cause), etype, []), fp)


def test_normalise_masks_numbers_and_cuts_paths() -> None:
    got = normalise("RuntimeError: at /usr/lib/python3.12/site-packages/x/kernel.cu:72 size 4096 ptr 0x7f00")
    assert got == "RuntimeError: at kernel.cu:# size # ptr #"


def test_nearest_weights_rare_words_and_skips_the_logs_own_source() -> None:
    oom = "torch.OutOfMemoryError"
    logs = [
        _log("o/r#1", "cuda_oom", f"{oom}: CUDA out of memory. Tried to allocate 2 GiB", oom, "aa"),
        _log("o/r#1", "cuda_oom", f"{oom}: CUDA out of memory. Tried to allocate 9 GiB", oom),
        _log("o/r#2", "cuda_oom", f"{oom}: CUDA out of memory in sampler", oom),
        _log("o/r#3", "nccl_error", "RuntimeError: NCCL error: unhandled system error", "RuntimeError"),
        _log("o/r#4", "weights_load_error", "KeyError: 'lm_head.weight'", "KeyError"),
    ]
    corpus = Corpus(logs)
    query = words(normalise("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7 GiB"),
                  "torch.OutOfMemoryError", [])
    near = corpus.nearest(query)
    assert [n.log.source for n in near][:2] == ["o/r#1", "o/r#1"]
    assert all(0 < n.score <= 1 for n in near)
    # The log whose fingerprint it is: neither it nor any other log of its source is offered.
    assert [n.log.source for n in corpus.nearest(query, own="aa")] == ["o/r#2"]
    assert corpus.nearest(words("nothing alike here at all", None, [])) == []


def test_shipped_data_is_evidence_only_and_current() -> None:
    docs = json.loads(public_logs.DATA.read_text(encoding="utf-8"))
    assert len(docs) >= 100
    for doc in docs:
        assert set(doc) == SHIPPED_KEYS, doc["source"]
        assert "#" in doc["source"] and doc["category"] != "healthy"
        assert len(doc["cause"]) <= 300 and len(doc["frames"]) <= public_logs.FRAMES
    ev = _eval()
    # Written by `scripts/eval-classify --ship-evidence` from every labelled set: rerun it when labels change.
    assert ev.shipped_evidence([d for d in ev.DEFAULT_DIRS if d.is_dir()]) == docs


@pytest.mark.slow
def test_a_shipped_log_is_never_offered_its_own_source() -> None:
    ev = _eval()
    offered = 0
    for folder in ev.DEFAULT_DIRS:
        for label in ev.labels_of(folder):
            evidence = read_evidence(folder / f"{label['id']}.log")
            near = similar_to(evidence, classify(evidence))
            offered += bool(near)
            assert label["source"] not in {n.log.source for n in near}, label["id"]
    assert offered >= 30


def test_a_failure_gets_similar_in_its_verdict_and_a_pass_none() -> None:
    failing = extract_evidence([
        "Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/layers/sampler.py", line 120, in forward',
        "    batch_next_token_ids = torch.multinomial(probs, num_samples=1)",
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
    ])
    verdict = classify(failing)
    near = (verdict.evidence or {})["similar"]
    assert near and near[0]["category"] == "nan_in_probs"
    assert set(near[0]) == {"source", "title", "category", "score", "note"}
    healthy = classify(extract_evidence(["[2026-01-01 10:00:00] The server is fired up and ready to roll!"]))
    assert healthy.evidence is None or not healthy.evidence.get("similar")


def test_bug_report_says_what_it_looks_like() -> None:
    why = {"similar": [{"source": "sgl-project/sglang#1", "title": "OOM <at> start", "category": "cuda_oom",
                        "score": 0.8, "note": "n"}]}
    assert _looks_like(why) == [
        "Looks like sgl-project/sglang#1: OOM &lt;at> start (`cuda_oom`, similarity 0.80).", ""]
    assert _looks_like({"similar": []}) == [] and _looks_like(None) == []


def test_fingerprint_reads_the_last_three_lines() -> None:
    assert fingerprint(["a", "b", "c", "d", ""]) == fingerprint(["x", "b", "c", "d"])
    assert fingerprint(["b", "c", "d"]) != fingerprint(["b", "c", "e"])


def test_a_named_cause_is_shown_public_logs_that_agree_with_it() -> None:
    logs = [_log("o/r#1", "nccl_error", "RuntimeError: watchdog timeout in collective", "RuntimeError"),
            PublicLog("o/r#2", "t", "hang_or_timeout", "n",
                      words(normalise("RuntimeError: watchdog timeout"), "RuntimeError", []), "", ("nccl_error",))]
    corpus = Corpus(logs)
    query = words("RuntimeError: watchdog timeout in collective", "RuntimeError", [])
    assert [n.log.source for n in corpus.nearest(query, category="nccl_error")] == ["o/r#1", "o/r#2"]
    assert [n.log.source for n in corpus.nearest(query, category="hang_or_timeout")] == ["o/r#2"]
    assert corpus.nearest(query, category="cuda_oom") == []


def test_a_catch_all_verdict_is_offered_another_cause_only_when_it_is_close(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = extract_evidence([
        "Traceback (most recent call last):",
        '  File "/srv/app/launcher.py", line 12, in main',
        "    start(config)",
        "ValueError: widget frobnicator quux setting rejected by launcher",
    ])
    verdict = classify(failing)
    assert verdict.category.value == "python_exception_other"
    cause = "ValueError: widget frobnicator quux setting rejected by launcher"
    close = _log("o/r#1", "weights_load_error", cause, "ValueError")
    loose = _log("o/r#2", "nccl_error", "ValueError: widget frobnicator setting refused by the group", "ValueError")
    same_kind = _log("o/r#3", "python_exception_other", "ValueError: widget frobnicator option rejected", "ValueError")
    others = [_log(f"o/f#{i}", "cuda_oom", f"RuntimeError: unrelated {c}x {c}y", "RuntimeError")
              for i, c in enumerate("abcdefgh")]
    corpus = Corpus([close, loose, same_kind, *others])
    query = words(normalise(cause), "ValueError", [])
    scores = {n.log.source: n.score for n in corpus.nearest(query)}
    # The loose neighbours are near enough to be offered in general, but not near enough to contradict the verdict.
    assert 0.25 <= scores["o/r#2"] < 0.6 and 0.25 <= scores["o/r#3"] < 0.6 <= scores["o/r#1"]
    monkeypatch.setattr("orchestrator.classify.similar.corpus", lambda: corpus)
    assert sorted(n.log.source for n in similar_to(failing, verdict)) == ["o/r#1", "o/r#3"]
