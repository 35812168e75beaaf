"""Score `classify` on labelled sets of real logs: category accuracy, root-cause line, healthy false alarms.

Usage: scripts/eval-classify DIR [DIR ...] [--json] [--show-misses]
Each DIR holds `<id>.log` files and a `labels.jsonl` (one object per log: id, category, root_cause_line, ...);
several `labels*.jsonl` files in one folder are read together. Every log goes through the same path as
`orchestrator classify --json` (chunked read, evidence, verdict). Prints one figure a line, then the
confusion pairs (label -> verdict) and, with --show-misses, each miss.

A root-cause line counts as found when the verdict's line is the labelled line (surrounding whitespace
ignored). A healthy false alarm is a log labelled healthy that the verdict calls a failure; a missed
failure is the reverse.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.classify.verdict import classify
from orchestrator.harvest.read import read_evidence


@dataclass(frozen=True)
class Scored:
    """One labelled log and what the classifier said of it."""

    set_name: str
    id: str
    label: str
    got: str
    root_expected: str | None
    root_got: str | None

    @property
    def category_ok(self) -> bool:
        return self.label == self.got

    @property
    def root_ok(self) -> bool:
        return (self.root_got or "").strip() == (self.root_expected or "").strip()


def labels_of(folder: Path) -> list[dict[str, Any]]:
    """Every label of a folder, from `labels.jsonl` and any `labels-*.jsonl` beside it."""
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("labels*.jsonl")):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{no}: not JSON ({exc.msg}); fix the line") from exc
    return out


def score_folder(folder: Path) -> list[Scored]:
    """Classify every labelled log of a folder."""
    scored = []
    for label in labels_of(folder):
        log = folder / f"{label['id']}.log"
        if not log.is_file():
            raise SystemExit(f"{folder}: label {label['id']!r} has no {log.name}; add the log or drop the label")
        verdict = classify(read_evidence(log))
        scored.append(
            Scored(folder.name, label["id"], label["category"], verdict.category.value,
                   label.get("root_cause_line"), verdict.root_cause_line)
        )
    return scored


def figures(scored: list[Scored]) -> dict[str, Any]:
    """The scores of a set of classified logs."""
    n = len(scored)
    healthy = [s for s in scored if s.label == "healthy"]
    failing = [s for s in scored if s.label != "healthy"]
    confusion = Counter(f"{s.label} -> {s.got}" for s in scored if not s.category_ok)
    return {
        "logs": n,
        "category_accuracy": round(sum(s.category_ok for s in scored) / n, 3) if n else None,
        "root_cause_line": round(sum(s.root_ok for s in scored) / n, 3) if n else None,
        "healthy_false_alarms": sum(s.got != "healthy" for s in healthy),
        "missed_failures": sum(s.got == "healthy" for s in failing),
        "healthy_logs": len(healthy),
        "confusion": dict(confusion.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score the classifier on labelled log folders.")
    parser.add_argument("dirs", nargs="+", type=Path, help="folders with <id>.log files and labels.jsonl")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--show-misses", action="store_true", help="list every miss with both answers")
    args = parser.parse_args(argv)
    scored: list[Scored] = []
    for folder in args.dirs:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder of labelled logs")
        scored += score_folder(folder)
    result = figures(scored)
    if args.json:
        print(json.dumps(result))
        return 0
    for key in ("logs", "category_accuracy", "root_cause_line", "healthy_false_alarms", "missed_failures"):
        print(f"{key}: {result[key]}")
    for pair, count in result["confusion"].items():
        print(f"  confusion {pair}: {count}")
    if args.show_misses:
        for s in scored:
            if not (s.category_ok and s.root_ok):
                print(f"\n{s.set_name}/{s.id}: label {s.label}, got {s.got}")
                if not s.root_ok:
                    print(f"  want: {s.root_expected!r}\n  got:  {s.root_got!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
