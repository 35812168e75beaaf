"""`orchestrator classify LOGFILE [--json]`: harvest and classify one SGLang log offline.

The file is read in binary chunks (bounded memory, any size); the evidence and the verdict are the
pure harvest/classify steps the sweep uses. Exit 0 once the log is classified, whatever the category;
exit 2 when the file cannot be read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.classify.verdict import classify
from orchestrator.cli import app
from orchestrator.harvest.evidence import Evidence, EvidenceBuilder
from orchestrator.model import Status, Verdict

CHUNK = 1 << 20
CONTEXT = 3
SHOWN_TRACEBACK_LINES = 20
SHOWN_WARNINGS = 30
_WIDTH = 400
_RUNS = re.compile(r"(.)\1{9,}")


def read_evidence(path: Path) -> Evidence:
    """The evidence of a log file, read in chunks."""
    builder = EvidenceBuilder()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            builder.feed(chunk)
    return builder.finish()


def root_line_no(evidence: Evidence, verdict: Verdict) -> int | None:
    """Where the verdict's root-cause line is in the file."""
    text = verdict.root_cause_line
    if text is None:
        return None
    lines = [h.line for h in evidence.hits] + [m.line for m in evidence.markers]
    if evidence.last_marker:
        lines.append(evidence.last_marker.line)
    found = [line.line_no for line in lines if line.text == text]
    return min(found) if found else None


def payload(evidence: Evidence, verdict: Verdict) -> dict[str, Any]:
    """The `--json` document: the verdict and the evidence a reader needs."""
    return {
        **verdict.to_dict(),
        "root_cause_line_no": root_line_no(evidence, verdict),
        "first_error": evidence.first_error.text if evidence.first_error else None,
        "first_error_line_no": evidence.first_error.line_no if evidence.first_error else None,
        "warnings": [w.to_dict() for w in evidence.warnings],
        "deprecations": [d.to_dict() for d in evidence.deprecations],
        "tracebacks": [t.to_dict() for t in evidence.tracebacks],
        "markers": [m.to_dict() for m in evidence.markers],
        "resolved": evidence.resolved,
        "versions": evidence.versions,
        "cuda_errors": [c.to_dict() for c in evidence.cuda_errors],
        "engine": evidence.engine,
        "lines": evidence.lines,
        "bytes": evidence.bytes,
    }


def lines_around(path: Path, line_no: int, radius: int = CONTEXT) -> list[tuple[int, str]]:
    """The physical lines `line_no - radius .. line_no + radius` of a file, found by counting line breaks."""
    first, last = max(1, line_no - radius), line_no + radius
    seen = 0
    region = b""
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            if not region and seen + chunk.count(b"\n") < first - 1:
                seen += chunk.count(b"\n")
                continue
            region += chunk
            if seen + region.count(b"\n") >= last:
                break
    out = []
    for offset, raw in enumerate(region.split(b"\n")):
        no = seen + offset + 1
        if first <= no <= last:
            out.append((no, raw.decode("utf-8", "replace")))
    return out


def _shown(physical: str, root: str | None) -> str:
    """A physical line as shown: the redraw holding the root cause, else the last one (tqdm uses \\r),
    with progress-bar runs squeezed."""
    parts = [p for p in physical.replace("\r\n", "\n").split("\r") if p] or [""]
    text = _RUNS.sub(lambda m: m.group(1) * 3 + "...", root if root is not None and root in parts else parts[-1])
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def render(console: Console, path: Path, evidence: Evidence, verdict: Verdict) -> None:
    """The human report: verdict, root cause in context, first traceback, warnings, resolved autos."""
    style = {Status.PASS: "green", Status.FAIL: "red", Status.INVALID: "yellow"}.get(verdict.status, "magenta")
    head = Text(f"{verdict.status.value}", style=f"bold {style}")
    head.append(f"  category={verdict.category.value}  phase={verdict.phase.value if verdict.phase else '-'}")
    console.print(head)
    console.print(Text(verdict.reason), soft_wrap=True)
    line_no = root_line_no(evidence, verdict)
    if line_no is not None:
        console.print(Text(f"\nroot cause, line {line_no}:", style="bold"))
        for no, physical in lines_around(path, line_no):
            mark = ">" if no == line_no else " "
            root = verdict.root_cause_line if no == line_no else None
            line = Text(f"{mark}{no:>8}  {_shown(physical, root)}", style="bold" if mark == ">" else "dim")
            console.print(line, soft_wrap=True)
    if evidence.first_error and evidence.first_error.text != verdict.root_cause_line:
        console.print(Text(f"\nfirst error, line {evidence.first_error.line_no}:", style="bold"))
        console.print(Text(f"  {_shown(evidence.first_error.text, None)}"), soft_wrap=True)
    if evidence.tracebacks:
        tb = evidence.tracebacks[0]
        extra = f", printed {tb.count} times" if tb.count > 1 else ""
        console.print(Text(f"\nfirst traceback, line {tb.line_no}{extra}:", style="bold"))
        for tb_line in tb.lines[-SHOWN_TRACEBACK_LINES:]:
            console.print(Text(f"  {_shown(tb_line, None)}"), soft_wrap=True)
    if evidence.warnings:
        table = Table("count", "first seen", "warning", title=f"{len(evidence.warnings)} distinct warnings")
        for w in evidence.warnings[:SHOWN_WARNINGS]:
            table.add_row(str(w.count), w.first_seen or f"line {w.line_no}", Text(_shown(w.text, None)))
        console.print(table)
    for title, values in (("resolved", evidence.resolved), ("versions", evidence.versions)):
        if values:
            console.print(Text(f"{title}: " + ", ".join(f"{k}={v}" for k, v in values.items())), soft_wrap=True)


@app.command("classify")
def classify_command(
    logfile: Annotated[Path, typer.Argument(help="An SGLang (or vLLM) server log, any size.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Harvest and classify one SGLang log offline: category, phase, root-cause line, tracebacks, warnings."""
    try:
        evidence = read_evidence(logfile)
    except OSError as exc:
        typer.echo(f"error: cannot read {logfile}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from exc
    verdict = classify(evidence)
    if as_json:
        typer.echo(json.dumps(payload(evidence, verdict)))
    else:
        render(Console(), logfile, evidence, verdict)
