"""`orchestrator classify PATH... [--json | --format term|json]`: harvest and classify server logs offline.

Each file is read in binary chunks (bounded memory, any size); the evidence and the verdict are the
pure harvest/classify steps the sweep uses. A directory stands for the logs in it (`*.log`, `*.txt`,
recursively). With `--json` (or `--format json`): one JSON object for one file, one object per line
(with `file`) for several, the log's text verbatim (JSON escapes it). The human report shows every
control character of the log's text as text (`^[` for ESC): a log's escape sequences are never obeyed.
Exit 0 once every log is classified, whatever the categories; exit 2 when a path cannot be read or
names no log (the others are still classified). Plain text out, no terminal library: one log
classifies in a fraction of a second, interpreter start included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from orchestrator.classify.verdict import LABELS, classify
from orchestrator.cli.formats import json_wanted
from orchestrator.cli.root import app
from orchestrator.harvest import read
from orchestrator.harvest.records import Evidence
from orchestrator.model import Status, Verdict
from orchestrator.textsafe import visible

CHUNK = read.CHUNK
CONTEXT = 3
SHOWN_TRACEBACK_LINES = 20
SHOWN_WARNINGS = 30
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
_WIDTH = 400
_RUNS = re.compile(r"(.)\1{9,}")
_COLOURS = {Status.PASS: "green", Status.FAIL: "red", Status.INVALID: "yellow"}


def read_evidence(path: Path) -> Evidence:
    """The evidence of a log file, read in chunks of CHUNK bytes."""
    return read.read_evidence(path, CHUNK)


def root_line_no(evidence: Evidence, verdict: Verdict) -> int | None:
    """Where the verdict's root-cause line is in the file."""
    if verdict.evidence and verdict.evidence.get("line_no"):
        return int(verdict.evidence["line_no"])
    text = verdict.root_cause_line
    if text is None:
        return None
    lines = [h.line for h in evidence.hits] + [m.line for m in evidence.markers]
    lines += [tb.exception_line for tb in evidence.tracebacks if tb.exception_line is not None]
    if evidence.last_marker:
        lines.append(evidence.last_marker.line)
    found = [line.line_no for line in lines if line.text == text]
    return min(found) if found else None


def payload(evidence: Evidence, verdict: Verdict) -> dict[str, Any]:
    """The `--json` document: the verdict, why (`evidence`), and the evidence a reader needs."""
    return {
        **verdict.to_dict(),
        "similar": similar(verdict),
        "root_cause_line_no": root_line_no(evidence, verdict),
        "first_error": evidence.first_error.text if evidence.first_error else None,
        "first_error_line_no": evidence.first_error.line_no if evidence.first_error else None,
        "warnings": [w.text for w in evidence.warnings],  # DESIGN's contract: a list of strings
        "warning_details": [w.to_dict() for w in evidence.warnings],
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


EMPTY_NOTE = "the file is empty: nothing was logged, so 'healthy' says nothing about the server"
_HEAD = 65536
_TEXT_CONTROLS = frozenset("\t\n\r\x1b\b\f\v")


def notes(path: Path, evidence: Evidence) -> list[str]:
    """What the verdict cannot say by itself: a log with nothing in it, or a file that is no text log.

    Either way the classifier finds no failure in it; said plainly, so that "healthy" is not read as
    "the server was fine" (a server that crashed before its first line, a core dump or archive passed by mistake).
    """
    if evidence.bytes == 0:
        return [EMPTY_NOTE]
    with path.open("rb") as f:
        head = f.read(_HEAD)
    text = head.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS))
    if b"\0" in head or odd > len(text) // 10:
        share = round(100 * odd / max(len(text), 1))
        return [f"not a text log ({share}% of its first {len(head)} bytes are NUL, control or invalid UTF-8 bytes)"]
    return []


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


def similar(verdict: Verdict) -> list[dict[str, Any]]:
    """The public logs the failure looks like (`[{source, title, category, score, note}]`, nearest first)."""
    return list((verdict.evidence or {}).get("similar") or [])


def looks_like(verdict: Verdict) -> str | None:
    """One line naming the nearest public log: `looks like sgl-project/sglang#N: <title> (category, score)`."""
    near = similar(verdict)
    if not near:
        return None
    first = near[0]
    return f"looks like {first['source']}: {first['title']} ({first['category']}, similarity {first['score']:.2f})"


def why(verdict: Verdict) -> str | None:
    """One line on what decided the category (rule, exception, frame, a close runner-up)."""
    ev = verdict.evidence
    if not ev:
        return None
    parts = [f"decided by {ev['rule']}"]
    if ev.get("exception_type"):
        parts.append(f"exception {ev['exception_type']}")
    if ev.get("innermost_frame"):
        parts.append(f"raised at {ev['innermost_frame']}")
    runner = ev.get("runner_up")
    if runner:
        parts.append(f"close call: {runner['category']} ({runner['rule']}, line {runner['line_no']})")
    return "; ".join(parts)


def _shown(physical: str, root: str | None) -> str:
    """A physical line as shown: the redraw holding the root cause, else the last one (tqdm uses \\r),
    with progress-bar runs squeezed and its control characters made visible."""
    parts = [p for p in physical.replace("\r\n", "\n").split("\r") if p] or [""]
    text = _RUNS.sub(lambda m: m.group(1) * 3 + "...", root if root is not None and root in parts else parts[-1])
    text = visible(text)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def render(path: Path, evidence: Evidence, verdict: Verdict) -> Iterator[str]:
    """The human report: verdict, why, root cause in context, first traceback, warnings, resolved autos."""
    colour = _COLOURS.get(verdict.status, "magenta")
    phase = verdict.phase.value if verdict.phase else "-"
    head = typer.style(verdict.status.value, fg=colour, bold=True)
    yield f"{head}  category={verdict.category.value}  phase={phase}"
    yield visible(verdict.reason)
    said = why(verdict)
    if said:
        yield typer.style(visible(said), dim=True)
    resembles = looks_like(verdict)
    if resembles:
        yield visible(resembles)
    line_no = root_line_no(evidence, verdict)
    if line_no is not None:
        yield typer.style(f"\nroot cause, line {line_no}:", bold=True)
        for no, physical in lines_around(path, line_no):
            mark = ">" if no == line_no else " "
            root = verdict.root_cause_line if no == line_no else None
            yield typer.style(f"{mark}{no:>8}  {_shown(physical, root)}", bold=mark == ">", dim=mark != ">")
    if evidence.first_error and evidence.first_error.text != verdict.root_cause_line:
        yield typer.style(f"\nfirst error, line {evidence.first_error.line_no}:", bold=True)
        yield f"  {_shown(evidence.first_error.text, None)}"
    if evidence.tracebacks:
        tb = evidence.tracebacks[0]
        extra = f", printed {tb.count} times" if tb.count > 1 else ""
        yield typer.style(f"\nfirst traceback, line {tb.line_no}{extra}:", bold=True)
        yield from (f"  {_shown(tb_line, None)}" for tb_line in tb.lines[-SHOWN_TRACEBACK_LINES:])
    if evidence.warnings:
        yield typer.style(f"\n{len(evidence.warnings)} distinct warnings (count, first seen, warning):", bold=True)
        for w in evidence.warnings[:SHOWN_WARNINGS]:
            yield f"  {w.count:>5}  {visible(w.first_seen or f'line {w.line_no}')}  {_shown(w.text, None)}"
    for title, values in (("resolved", evidence.resolved), ("versions", evidence.versions)):
        if values:
            yield visible(f"{title}: " + ", ".join(f"{k}={v}" for k, v in values.items()))


def log_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The files to classify (a directory: its logs, recursively, sorted) and the problems met."""
    files: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES)
            if not found:
                problems.append(f"{path}: no log files in it (looked for {', '.join(LOG_SUFFIXES)})")
            files += found
        else:
            files.append(path)
    return files, problems


@app.command("classify")
def classify_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH...", help="Server logs (SGLang or vLLM, any size), or folders of them."),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: one object, or one per line (with `file`) for several logs.")
    ] = False,
    fmt: Annotated[
        Literal["term", "json"] | None,
        typer.Option("--format", "-f", help="Output format: term (the report), json (the same as --json)."),
    ] = None,
) -> None:
    """Harvest and classify server logs offline: category, phase, root-cause line, why, tracebacks, warnings."""
    as_json = json_wanted(as_json, fmt)
    files, problems = log_files(paths)
    several = len(files) > 1 or any(p.is_dir() for p in paths)
    for problem in problems:
        typer.echo(visible(f"error: {problem}"), err=True)
    for path in files:
        try:
            evidence = read_evidence(path)
            said = notes(path, evidence)
        except OSError as exc:
            problems.append(str(path))
            typer.echo(visible(f"error: cannot read {path}: {exc.strerror or exc}"), err=True)
            continue
        verdict = classify(evidence)
        if as_json:
            doc = {**payload(evidence, verdict), "notes": said}
            typer.echo(json.dumps({"file": str(path), **doc} if several else doc))
            continue
        if several:
            typer.echo(typer.style(f"== {visible(str(path))}: ", bold=True) + LABELS[verdict.category])
        for line in render(path, evidence, verdict):
            typer.echo(line)
        for note in said:
            typer.echo(typer.style(f"note: {note}", fg="yellow"))
        if several:
            typer.echo("")
    if problems:
        raise typer.Exit(2)
