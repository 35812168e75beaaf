"""Score `classify` on labelled sets of real logs: category accuracy, root-cause line, healthy false alarms.

Usage: scripts/eval-classify [DIR ...] [--json] [--show-misses] [--split]
Each DIR holds `<id>.log` files and a `labels.jsonl` (one object per log: id, source, category, root_cause_line,
also_ok, ...); several `labels*.jsonl` files in one folder are read together. With no DIR, every labelled set the
project knows is scored (the shared fixtures and tests/data/real-logs). Every log goes through the same path as
`orchestrator classify --json` (chunked read, evidence, verdict, similar public logs). Prints one figure a line,
then the confusion pairs (label -> verdict) and, with --show-misses, each miss.

`--split` divides the logs by a stable hash of their `source` into a fitting part (about three quarters: rules
are written looking at its misses only) and a checking part (the honest estimate on logs the rules were not
written against), and prints one line per part. --show-misses then lists the fitting part's misses only.

A category counts as right when it is the label or one of its `also_ok` (taxonomy.md, "Either is right"). A
root-cause line counts as found when the verdict's line is the labelled line (surrounding whitespace ignored).
A healthy log whose label designates no line counts as found when the verdict
is healthy. A healthy false alarm is a log labelled healthy that the verdict calls a failure; a missed failure is the
reverse. `similar_precision`: of the failing logs shown a similar public log, the share whose first one has
the log's category (or an `also_ok` one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.classify.similar import cause_of
from orchestrator.classify.verdict import classify
from orchestrator.harvest.read import read_evidence
from orchestrator.knowledge import public_logs

REPO = Path(__file__).resolve().parents[1]

DEFAULT_DIRS = (
    REPO.parent / "shared" / "fixtures" / "crash-logs",
    REPO.parent / "shared" / "fixtures" / "crash-logs-2",
    REPO / "tests" / "data" / "real-logs",
)
CHECKING_SHARE = 4
"""One log in this many (by the hash of its source) is in the checking part."""


@dataclass(frozen=True)
class Scored:
    """One labelled log and what the classifier said of it."""

    set_name: str
    id: str
    label: str
    got: str
    root_expected: str | None
    root_got: str | None
    source: str = ""
    also_ok: tuple[str, ...] = ()
    similar: str | None = None
    """The category of the first similar public log shown, None when none was shown."""

    @property
    def category_ok(self) -> bool:
        return self.got == self.label or self.got in self.also_ok

    @property
    def root_ok(self) -> bool:
        if self.root_expected is None and self.label == "healthy":
            return self.got == "healthy"  # no line is designated: a healthy verdict has nothing more to find
        # taxonomy.md: the labelled line is matched as a substring of the line found, whatever that line's prefix
        # (a label may quote the message without its timestamp, rank or logger tag).
        expected = (self.root_expected or "").strip()
        return bool(expected) and expected in (self.root_got or "")

    @property
    def similar_ok(self) -> bool:
        return self.similar is not None and (self.similar == self.label or self.similar in self.also_ok)


def part_of(source: str) -> str:
    """`checking` or `fitting`: a stable hash of the log's source (the same on every machine and run)."""
    digest = hashlib.sha256(source.strip().encode("utf-8")).digest()
    return "checking" if int.from_bytes(digest[:8], "big") % CHECKING_SHARE == 0 else "fitting"


def labels_of(folder: Path) -> list[dict[str, Any]]:
    """Every label of a folder, from `labels.jsonl` and any `labels-*.jsonl` beside it."""
    return [label for path in sorted(folder.glob("labels*.jsonl")) for label in labels_in(path)]


def labels_in(path: Path) -> list[dict[str, Any]]:
    """The labels of one labels file, one JSON object a line."""
    out: list[dict[str, Any]] = []
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
        near = (verdict.evidence or {}).get("similar") or []
        scored.append(
            Scored(folder.name, label["id"], label["category"], verdict.category.value,
                   label.get("root_cause_line"), verdict.root_cause_line, label.get("source", ""),
                   tuple(label.get("also_ok") or ()), near[0]["category"] if near else None)
        )
    return scored


NOTE_CHARS = 240


def shipped_evidence(folders: list[Path]) -> list[dict[str, Any]]:
    """The evidence shipped for `similar` of every labelled failing log: never the log, only what it is compared
    on (exception type, normalised cause line, innermost frames), its source, title, category, our note, and the
    fingerprint that keeps a log from being offered as similar to itself."""
    docs = []
    for folder in folders:
        for label in labels_of(folder):
            root = label.get("root_cause_line")
            if label["category"] == "healthy" or not root:
                continue
            evidence = read_evidence(folder / f"{label['id']}.log")
            cause, etype, frames = cause_of(evidence, root)
            note = " ".join(str(label.get("notes", "")).split())
            docs.append({
                "source": label["source"], "title": label.get("title") or "", "category": label["category"],
                "also_ok": list(label.get("also_ok") or []),
                "note": note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 3] + "...",
                "exception_type": etype, "cause": cause,
                "frames": [public_logs.normalise(f) for f in frames[: public_logs.FRAMES]],
                "fingerprint": public_logs.fingerprint(evidence.tail),
            })
    docs.sort(key=lambda d: (d["source"], d["cause"]))
    return docs


def figures(scored: list[Scored]) -> dict[str, Any]:
    """The scores of a set of classified logs."""
    n = len(scored)
    healthy = [s for s in scored if s.label == "healthy"]
    failing = [s for s in scored if s.label != "healthy"]
    shown = [s for s in failing if s.similar is not None]
    confusion = Counter(f"{s.label} -> {s.got}" for s in scored if not s.category_ok)
    return {
        "logs": n,
        "category_accuracy": round(sum(s.category_ok for s in scored) / n, 3) if n else None,
        "root_cause_line": round(sum(s.root_ok for s in scored) / n, 3) if n else None,
        "healthy_false_alarms": sum(s.got != "healthy" for s in healthy),
        "missed_failures": sum(s.got == "healthy" for s in failing),
        "healthy_logs": len(healthy),
        "similar_precision": round(sum(s.similar_ok for s in shown) / len(shown), 3) if shown else None,
        "similar_shown": len(shown),
        "confusion": dict(confusion.most_common()),
    }


def split(scored: list[Scored]) -> dict[str, list[Scored]]:
    """The scored logs by part."""
    parts: dict[str, list[Scored]] = {"checking": [], "fitting": []}
    for s in scored:
        parts[part_of(s.source or f"{s.set_name}/{s.id}")].append(s)
    return parts


def part_line(name: str, result: dict[str, Any]) -> str:
    """One part's figures on one line."""
    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    failing = result["logs"] - result["healthy_logs"]
    return (f"{name}: category_accuracy={fmt(result['category_accuracy'])} "
            f"root_cause_line={fmt(result['root_cause_line'])} "
            f"healthy_false_alarms={result['healthy_false_alarms']} "
            f"similar_precision={fmt(result['similar_precision'])} "
            f"(n={failing}+{result['healthy_logs']} healthy)")


def _misses(scored: list[Scored]) -> None:
    for s in scored:
        if not (s.category_ok and s.root_ok):
            print(f"\n{s.set_name}/{s.id}: label {s.label}, got {s.got}")
            if not s.root_ok:
                print(f"  want: {s.root_expected!r}\n  got:  {s.root_got!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score the classifier on labelled log folders.")
    parser.add_argument("dirs", nargs="*", type=Path,
                        help="folders with <id>.log files and labels.jsonl (default: every labelled set)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--show-misses", action="store_true",
                        help="list every miss with both answers (with --split: the fitting part's only)")
    parser.add_argument("--split", action="store_true",
                        help="score the fitting part (~3/4, by a hash of the source) and the checking part apart")
    parser.add_argument("--ship-evidence", action="store_true",
                        help=f"write the labelled failing logs' evidence for `similar` to {public_logs.DATA}")
    args = parser.parse_args(argv)
    folders: list[Path] = args.dirs or [d for d in DEFAULT_DIRS if d.is_dir()]
    for folder in folders:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder of labelled logs")
    if args.ship_evidence:
        docs = shipped_evidence(folders)
        public_logs.DATA.parent.mkdir(exist_ok=True)
        public_logs.DATA.write_text(json.dumps(docs, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{len(docs)} logs' evidence written to {public_logs.DATA}")
        return 0
    scored: list[Scored] = []
    for folder in folders:
        scored += score_folder(folder)
    if args.split:
        parts = split(scored)
        results = {name: figures(part) for name, part in parts.items()}
        if args.json:
            print(json.dumps(results))
            return 0
        for name in ("checking", "fitting"):
            print(part_line(name, results[name]))
        for pair, count in results["fitting"]["confusion"].items():
            print(f"  fitting confusion {pair}: {count}")
        if args.show_misses:
            _misses(parts["fitting"])
        return 0
    result = figures(scored)
    if args.json:
        print(json.dumps(result))
        return 0
    for key in ("logs", "category_accuracy", "root_cause_line", "healthy_false_alarms", "missed_failures",
                "similar_precision"):
        print(f"{key}: {result[key]}")
    for pair, count in result["confusion"].items():
        print(f"  confusion {pair}: {count}")
    if args.show_misses:
        _misses(scored)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
