"""Measure whether a learned category helps where the rules fall to a catch-all (issue 32).

Usage: scripts/eval-learned [DIR ...] [--learners nb,logreg,knn,...] [--then] [--inner now|then|both] [--fixed P]
       [--no-source-messages] [--show-changes] [--json]

Every labelled log is classified once by the rules (the same path as `classify --json`). A model trained on
the exception type, the root-cause line's words and the innermost frames of labelled logs (and of the source
messages in tests/data/source-messages/) may then replace a catch-all category (python_exception_other /
unknown) of a failing verdict; never a healthy one, never a named one. Both arms on the same tree in one run:
- leave one batch out: each fresh batch (labels-issue32j.jsonl and later, each gathered in one go) is scored
  by a model trained on every other labelled log whose source is not in that batch;
- with --then, each fresh batch also as the rules classified it before it was committed (the code of the parent
  of the commit that added its labels file, run from `git archive`): a batch no rule had seen;
- the fitting part (eval_classify.part_of) trains, the checking part is scored.
A model answers only at or above a confidence chosen on its training logs alone: their catch-all verdicts, each
training batch predicted by a model of the others (--inner: as the rules classify them now, as the rules did
before they saw each batch, or both), the lowest threshold with the most right answers net of wrong ones. A
model may answer a catch-all itself, which keeps the rules' category.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_classify import DEFAULT_DIRS, REPO, Scored, labels_in, part_of
from learners import LEARNERS, Example, Predictor, abstain

from orchestrator.classify.candidates import candidates
from orchestrator.classify.similar import cause_of
from orchestrator.classify.verdict import classify
from orchestrator.harvest.read import read_evidence
from orchestrator.knowledge import public_logs
from orchestrator.model import Status

CATCH_ALL = frozenset({"python_exception_other", "unknown"})
FRESH = re.compile(r"labels-issue32([j-z]\d*)\.jsonl$")
"""Batches gathered in one go and scored before any rule saw them: 32j onwards."""
SOURCE_MESSAGES = REPO / "tests" / "data" / "source-messages"
THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999, 1.01)
"""The confidences a model may be asked to reach before it answers; 1.01 is never (the rules alone)."""
_PKG = re.compile(r'File "([^"]+)"')


@dataclass(frozen=True)
class Log:
    """One labelled log: its label, what the rules said, and the words a model reads."""

    batch: str
    id: str
    source: str
    label: str
    also_ok: tuple[str, ...]
    got: str
    failing: bool
    root_ok: bool
    words: frozenset[str]
    """Of the verdict's root-cause line: what a classify run has."""
    label_words: frozenset[str]
    """Of the labelled root-cause line (training only)."""
    path: str = ""
    expected: str = ""
    candidates: frozenset[str] = frozenset()
    """The categories of every candidate line the rules found (what a re-ranking could choose from)."""
    root: str | None = None
    """The verdict's root-cause line."""

    def right(self, category: str) -> bool:
        return category == self.label or category in self.also_ok


def features(cause: str, etype: str | None, frames: Sequence[str]) -> frozenset[str]:
    """public_logs.words plus the packages of the innermost frames (`pkg:model_executor`)."""
    out = set(public_logs.words(cause, etype, list(frames)))
    for frame in frames[: public_logs.FRAMES]:
        m = _PKG.search(frame)
        if m:
            parts = m.group(1).replace("\\", "/").split("/")
            keep = parts[-4:-1]
            out |= {"pkg:" + p.lower() for p in keep if p and not p.startswith(("python", "site-", "dist-"))}
    return frozenset(out)


def _words_of(evidence: Any, line: str | None) -> frozenset[str]:
    if not line:
        return frozenset()
    cause, etype, frames = cause_of(evidence, line)
    return features(cause, etype, frames)


def label_files(folders: list[Path]) -> list[Path]:
    return [p for f in folders for p in sorted(f.glob("labels*.jsonl"))]


def collect(folders: list[Path]) -> list[Log]:
    """Classify every labelled log with the rules and read its features."""
    out = []
    for path in label_files(folders):
        m = FRESH.search(path.name)
        batch = f"32{m.group(1)}" if m else f"{path.parent.name}/{path.stem}"
        for label in labels_in(path):
            evidence = read_evidence(path.parent / f"{label['id']}.log")
            verdict = classify(evidence)
            expected = (label.get("root_cause_line") or "").strip()
            root_ok = Scored(path.parent.name, label["id"], label["category"], verdict.category.value,
                             label.get("root_cause_line"), verdict.root_cause_line).root_ok
            labelled_line = next((t for t in evidence.tail if expected and expected in t), None) or expected
            out.append(Log(
                batch, label["id"], label.get("source") or f"{path.parent.name}/{label['id']}", label["category"],
                tuple(label.get("also_ok") or ()), verdict.category.value, verdict.status is not Status.PASS,
                root_ok, _words_of(evidence, verdict.root_cause_line) if verdict.status is not Status.PASS
                else frozenset(), _words_of(evidence, labelled_line or None), str(path.parent / f"{label['id']}.log"),
                expected, frozenset(c.category.value for c in candidates(evidence)), verdict.root_cause_line,
            ))
    return out


_THEN = """
import json, sys
from pathlib import Path
from orchestrator.classify.verdict import classify
from orchestrator.harvest.read import read_evidence
try:
    from orchestrator.classify.candidates import candidates
except ImportError:
    candidates = None
out = {}
for path in json.loads(sys.argv[1]):
    evidence = read_evidence(Path(path))
    v = classify(evidence)
    found = [c.category.value for c in candidates(evidence)] if candidates else []
    out[path] = [v.category.value, v.status.value != "pass", v.root_cause_line, found]
print(json.dumps(out))
"""


def rules_then(logs: list[Log]) -> list[Log]:
    """Each fresh batch's logs as the rules classified them before the batch reached the tree (the code of the parent
    of the commit that added its labels file): the figures of a batch no rule had seen."""
    out = []
    for batch in sorted({log.batch for log in logs if log.batch.startswith("32")}):
        mine = [log for log in logs if log.batch == batch]
        rel = f"tests/data/real-logs/labels-issue{batch}.jsonl"
        added = subprocess.run(["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--", rel],
                               capture_output=True, text=True, check=True).stdout.split()
        if not added:
            continue  # not committed yet: no earlier rules to compare with
        with tempfile.TemporaryDirectory() as tmp:
            tar = subprocess.run(["git", "-C", str(REPO), "archive", f"{added[-1]}^", "orchestrator"],
                                 capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
                archive.extractall(tmp, filter="data")
            said = json.loads(subprocess.run(
                [sys.executable, "-c", _THEN, json.dumps([log.path for log in mine])], cwd=tmp,
                env={**os.environ, "PYTHONPATH": tmp}, capture_output=True, text=True, check=True).stdout)
        for log in mine:
            got, failing, root, found = said[log.path]
            evidence = read_evidence(Path(log.path))
            root_ok = (bool(log.expected) and log.expected in (root or "")) if log.expected or log.label != "healthy" \
                else got == "healthy"
            out.append(replace(log, got=got, failing=failing, root_ok=root_ok, candidates=frozenset(found), root=root,
                               words=_words_of(evidence, root) if failing else frozenset()))
    return out


def source_message_examples() -> list[tuple[frozenset[str], str]]:
    """(features, category) of every source message, placed in the minimal log its test builds."""
    from tests.classify.test_source_messages import HELD_OUT, MESSAGES, build_log, load_messages

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        for message in load_messages(MESSAGES) + load_messages(HELD_OUT):
            lines = build_log(message)
            log.write_text("\n".join(lines) + "\n", encoding="utf-8")
            evidence = read_evidence(log)
            first = message.text.split("\n")[0]
            line = next((t for t in reversed(evidence.tail) if first and first in t), None)
            if line is None:
                continue
            out.append((_words_of(evidence, line), message.category.value))
    return out


def examples_of(logs: list[Log], with_verdict_lines: bool) -> list[Example]:
    """Training examples: each failing log's labelled line, and (optionally) the rules' own line where it differs."""
    out = []
    for log in logs:
        if log.label == "healthy":
            continue
        if log.label_words:
            out.append((log.label_words, log.label))
        if with_verdict_lines and log.words and log.words != log.label_words:
            out.append((log.words, log.label))
    return out


def applies(log: Log) -> bool:
    """Where the model may decide: a failing verdict the rules left at a catch-all."""
    return log.failing and log.got in CATCH_ALL and bool(log.words)


def decide(log: Log, predict: Predictor, threshold: float) -> str:
    if not applies(log):
        return log.got
    cat, conf = predict(log.words)
    return cat if cat not in CATCH_ALL and cat != "healthy" and conf >= threshold else log.got


def choose_threshold(train: list[Log], inner: list[Log], extra: list[Example], learner: str,
                     with_verdict_lines: bool) -> float:
    """The confidence that would have done best on the training logs alone: the catch-all verdicts of `inner` (training
    logs, as the rules of now or of then classified them), each group (batch) predicted by a model of the rest of the
    training logs; the lowest threshold among those with the most right answers net of wrong ones."""
    groups: dict[str, list[Log]] = defaultdict(list)
    for log in inner:
        groups[_group(log)].append(log)
    outcomes: list[tuple[float, int]] = []
    """(confidence, +1 when the model's answer is right and the rules' not, -1 the reverse, 0 when neither)"""
    for name, held in groups.items():
        targets = [log for log in held if applies(log)]
        if not targets:
            continue
        sources = {log.source for log in held}
        rest = [log for log in train if _group(log) != name and log.source not in sources]
        examples = examples_of(rest, with_verdict_lines) + extra
        if not examples:
            continue
        predict = LEARNERS[learner](examples)
        for log in targets:
            cat, conf = predict(log.words)
            if cat in CATCH_ALL or cat == "healthy":
                continue
            outcomes.append((conf, int(log.right(cat)) - int(log.right(log.got))))
    best, best_gain = 1.01, 0
    for threshold in THRESHOLDS:
        gain = sum(delta for conf, delta in outcomes if conf >= threshold)
        if gain > best_gain:
            best, best_gain = threshold, gain
    return best


def _group(log: Log) -> str:
    """Inner folds: the fresh batches one by one, the older sets in four parts by source."""
    if log.batch.startswith("32"):
        return log.batch
    return "old" + str(sum(log.source.encode()) % 4)


def score(logs: list[Log], cats: list[str]) -> dict[str, Any]:
    n = len(logs)
    return {
        "logs": n,
        "category_accuracy": round(sum(log.right(c) for log, c in zip(logs, cats, strict=True)) / n, 3) if n else None,
        "right": sum(log.right(c) for log, c in zip(logs, cats, strict=True)),
        "root_cause_line": round(sum(log.root_ok for log in logs) / n, 3) if n else None,
        "healthy_false_alarms": sum(c != "healthy" for log, c in zip(logs, cats, strict=True)
                                    if log.label == "healthy"),
        "catch_all_verdicts": sum(applies(log) for log in logs),
        "ceiling": sum(applies(log) and not log.right(log.got) and log.label != "healthy" for log in logs),
        "candidate_ceiling": sum(applies(log) and not log.right(log.got) and (log.label in log.candidates
                                 or bool(set(log.also_ok) & log.candidates)) for log in logs),
    }


def run_fold(train: list[Log], test: list[Log], extra: list[Example], learner: str, with_verdict_lines: bool,
             fixed: float | None = None, then: list[Log] | None = None, both: bool = False) -> dict[str, Any]:
    """Score `test` by the rules, and by the rules and a model trained on `train` (less the test's sources). The
    threshold is chosen on the training logs' catch-alls: with `then`, as the rules classified the training batches
    before they saw them (the catch-alls of logs no rule had seen; with `both`, those and today's), else as the rules
    classify them now."""
    sources = {log.source for log in test}
    train = [log for log in train if log.source not in sources]
    if not test:
        return {}
    kept = {(log.batch, log.id) for log in train}
    inner = train if then is None else [log for log in then if (log.batch, log.id) in kept] + (train if both else [])
    threshold = fixed if fixed is not None else choose_threshold(train, inner, extra, learner, with_verdict_lines)
    examples = examples_of(train, with_verdict_lines) + extra
    predict = LEARNERS[learner](examples) if examples else abstain
    cats = [decide(log, predict, threshold) for log in test]
    changed = [(log.id, log.got, c, log.label, log.right(c)) for log, c in zip(test, cats, strict=True)
               if c != log.got]
    return {"rules": score(test, [log.got for log in test]), "model": score(test, cats),
            "threshold": threshold, "changed": changed}


def evaluate(logs: list[Log], then: list[Log], extra: list[Example], learner: str, with_verdict_lines: bool,
             fixed: float | None = None, inner: str = "now") -> dict[str, Any]:
    out: dict[str, Any] = {}
    pick = then if inner != "now" else None
    both = inner == "both"
    for batch in sorted({log.batch for log in logs if log.batch.startswith("32")}):
        test = [log for log in logs if log.batch == batch]
        out[batch] = run_fold([log for log in logs if log.batch != batch], test, extra, learner,
                              with_verdict_lines, fixed, pick, both)
    for log_then in sorted({log.batch for log in then}):
        test = [log for log in then if log.batch == log_then]
        out[f"{log_then}-then"] = run_fold([log for log in logs if log.batch != log_then], test, extra, learner,
                                           with_verdict_lines, fixed, pick, both)
    checking = [log for log in logs if part_of(log.source) == "checking"]
    fitting = [log for log in logs if part_of(log.source) == "fitting"]
    out["checking"] = run_fold(fitting, checking, extra, learner, with_verdict_lines, fixed, pick, both)
    return out


def table(name: str, result: dict[str, Any]) -> list[str]:
    rows = [f"== {name}"]
    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for key, fold in result.items():
        if not fold:
            continue
        r, m = fold["rules"], fold["model"]
        if key != "checking":
            kind = pooled["then" if key.endswith("-then") else "now"]
            kind[0] += r["right"]
            kind[1] += m["right"]
            kind[2] += r["logs"]
        rows.append(f"  {key:9} n={r['logs']:3} catch-all={r['catch_all_verdicts']:2} "
                    f"(wrong {r['ceiling']}, of them with a candidate of the label {r['candidate_ceiling']}) "
                    f"category rules={r['category_accuracy']:.3f} model={m['category_accuracy']:.3f} "
                    f"root={r['root_cause_line']:.3f} healthy_fa rules={r['healthy_false_alarms']} "
                    f"model={m['healthy_false_alarms']} threshold={fold['threshold']} changed={len(fold['changed'])} "
                    f"(right {sum(change[4] for change in fold['changed'])})")
    for rules_of, (rules, model, n) in pooled.items():  # every fresh batch together: the leave-one-batch-out figure
        rows.append(f"  leave-one-batch-out pooled ({rules_of}'s rules): rules={rules / n:.3f} model={model / n:.3f} "
                    f"(n={n})")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure a learned category for the rules' catch-all verdicts.")
    parser.add_argument("dirs", nargs="*", type=Path, help="labelled log folders (default: every labelled set)")
    parser.add_argument("--learners", default="nb,nb0.1,knn,knn3,nb&knn",
                        help="comma-separated, of: " + ",".join(LEARNERS) + " (logreg takes ~15 min with --then)")
    parser.add_argument("--no-source-messages", action="store_true", help="train on the labelled logs only")
    parser.add_argument("--fixed", type=float, default=None, help="use this confidence instead of choosing one")
    parser.add_argument("--show-changes", action="store_true", help="list each category the model changed")
    parser.add_argument("--then", action="store_true",
                        help="also score each fresh batch with the rules as they were before it was committed")
    parser.add_argument("--inner", choices=("now", "then", "both"), default="now",
                        help="choose the threshold on the training logs' catch-alls as the rules classify them now, "
                        "(with --then) as the rules classified each training batch before they saw it, or both")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object")
    args = parser.parse_args(argv)
    folders: list[Path] = args.dirs or [d for d in DEFAULT_DIRS if d.is_dir()]
    logs = collect(folders)
    extra = [] if args.no_source_messages else source_message_examples()
    if args.inner != "now" and not args.then:
        parser.error(f"--inner {args.inner} needs --then")
    then = rules_then(logs) if args.then else []
    results: dict[str, Any] = {}
    for learner in args.learners.split(","):
        if learner not in LEARNERS:
            parser.error(f"unknown learner {learner!r}; choose from {', '.join(LEARNERS)}")
        for with_verdict_lines in (False, True):
            name = f"{learner}{'+verdict-lines' if with_verdict_lines else ''}"
            results[name] = evaluate(logs, then, extra, learner, with_verdict_lines, args.fixed, args.inner)
            if not args.json:
                print("\n".join(table(name, results[name])), flush=True)
                if args.show_changes:
                    for key, fold in results[name].items():
                        for change in fold.get("changed", ()):
                            print(f"    {key}: {change[0]}: {change[1]} -> {change[2]} (label {change[3]})")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
