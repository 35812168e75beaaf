"""`orchestrator bugreport RUN`: one failing run as Markdown to paste into an SGLang GitHub issue. Pure: text out.

The report says what an SGLang maintainer asks first: versions and GPUs, the exact command (secrets
masked: the store never holds them), what was sent, what happened, the line that names the cause, the
first traceback trimmed to the frames nearest the exception, the warnings, which one-flag neighbours of
the configuration pass, and a script that reproduces it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.model import UNSET, Cell, FlagList, FlagValue, ProbeResult, Status
from orchestrator.report.repro import render_repro_script
from orchestrator.store.records import RunRecord, SweepRecord
from orchestrator.store.results import CellResult

BODY_MAX = 65_000
"""GitHub refuses issue bodies over 65,536 characters."""
TRACEBACK_FRAMES = 6
"""Frames kept next to the exception; the frames above them are collapsed into one line."""
_FRAME = re.compile(r"^\s*File \"")
_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*")
_LAUNCH_ENV = ("CUDA_VISIBLE_DEVICES",)
"""Variables the launcher sets that matter to a reader; the rest of its environment (PATH, ...) does not."""


def fence(text: str, lang: str = "") -> str:
    """A fenced code block that no run of backticks inside `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{lang}\n{text.rstrip()}\n{marks}"


def _code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _shown(value: FlagValue) -> str:
    if value is None or value is False:
        return UNSET
    if isinstance(value, FlagList):
        return " ".join(value.arguments)  # as the command line has it: one argument per value
    return "(set)" if value is True else str(value)


def trim_traceback(lines: Sequence[str], keep_frames: int = TRACEBACK_FRAMES) -> list[str]:
    """The traceback's first line, a note for the collapsed middle, then the last frames and the exception."""
    starts = [i for i, line in enumerate(lines) if _FRAME.match(_LOG_PREFIX.sub("", line))]
    if len(starts) <= keep_frames + 1:
        return list(lines)
    first_kept = starts[-keep_frames]
    hidden = len(starts) - keep_frames
    note = f"  ... {hidden} outer frames ({first_kept - 1} lines) omitted: the frames nearest the exception follow ..."
    return [lines[0], note, *lines[first_kept:]]


def neighbours(cell: Cell, results: Sequence[CellResult]) -> list[tuple[str, FlagValue, FlagValue]]:
    """Passing cells of the sweep that differ from `cell` in exactly one flag value: (flag, this value, theirs)."""

    def values(c: Cell) -> dict[str, FlagValue]:
        flags: dict[str, FlagValue] = {k: v for k, v in c.flags.items() if v is not None and v is not False}
        return {**flags, "install": c.install} if c.install or cell.install else flags

    mine = values(cell)
    found = []
    for result in results:
        if result.status is not Status.PASS or result.cell.cell_id == cell.cell_id:
            continue
        theirs = values(result.cell)
        differ = [n for n in dict.fromkeys([*mine, *theirs]) if str(mine.get(n)) != str(theirs.get(n))]
        if len(differ) == 1:
            found.append((differ[0], mine.get(differ[0]), theirs.get(differ[0])))
    return found


def _environment(run: RunRecord, sweep: SweepRecord) -> list[str]:
    versions = {str(k): str(v) for k, v in (sweep.versions or {}).items() if v is not None}
    if run.install:
        # Environments as an axis: each install's versions are stored as `name[install]`.
        suffix = f"[{run.install}]"
        versions |= {k[: -len(suffix)]: v for k, v in versions.items() if k.endswith(suffix)}
    versions = {k: v for k, v in versions.items() if "[" not in k}
    facts = sweep.host_facts or {}
    python = ((run.evidence or {}).get("versions") or {}).get("python")
    rows = [("SGLang", versions.pop("sglang", "unknown"))]
    gpu = facts.get("gpu_name")
    count = facts.get("gpus")
    if gpu or count:
        rows.append(("GPUs", f"{count or '?'} × {gpu or 'unknown model'}"))
    rows += [
        (label, str(facts[key]))
        for key, label in (("compute_cap", "compute capability"), ("driver", "driver"))
        if facts.get(key)
    ]
    if python:
        rows.append(("Python", str(python)))
    rows += sorted(versions.items())
    rows.append(("host", f"{sweep.host}" + (f" (install {run.install})" if run.install else "")))
    return ["| | |", "|---|---|", *(f"| {name} | {_code(value)} |" for name, value in rows)]


def shown_env(run: RunRecord, cell: Cell) -> dict[str, str]:
    """The run's environment a reader needs: the matrix's variables and the GPUs, secrets masked."""
    return {k: run.env_masked[k] for k in (*cell.env, *_LAUNCH_ENV) if k in run.env_masked}


def _command(run: RunRecord, cell: Cell) -> str:
    prefix = "".join(f"{name}={value} \\\n" for name, value in shown_env(run, cell).items())
    return fence(prefix + run.command.replace(" --", " \\\n  --"), "bash")


def _sent(run: RunRecord) -> list[str]:
    outcome = run.outcome
    if outcome is None or not outcome.reached_ready:
        phase = run.verdict.phase.value if run.verdict and run.verdict.phase else "startup"
        return [f"Nothing: the server never became ready (it stopped at `{phase}`), so no request was sent."]
    probes = outcome.probes
    failed = outcome.failed_probe
    lines = [_probe_line(p) for p in probes]
    if failed is None:
        return ["Every probe got a good answer:", "", *lines]
    earlier = lines[: probes.index(failed)]
    body = {k: v for k, v in failed.request.items() if k != "endpoint"}
    endpoint = failed.request.get("endpoint")
    where = f" `POST {endpoint}`" if endpoint else ""
    text = [f"The `{failed.name}` probe{where}, after the server reported ready in {outcome.ready_s or 0:.1f} s:", ""]
    text.append(fence(json.dumps(body, indent=2, ensure_ascii=False), "json"))
    if earlier:
        text += ["", "Sent before it, with good answers:", "", *earlier]
    return text


def _probe_line(probe: ProbeResult) -> str:
    latency = "-" if probe.latency_s is None else f"{probe.latency_s:.3f} s"
    endpoint = probe.request.get("endpoint", "")
    state = "ok" if probe.ok else "**failed**"
    return (
        f"- `{probe.name}` {_code(str(endpoint))}: {state} in {latency}"
        if endpoint
        else (f"- `{probe.name}`: {state} in {latency}")
    )


def _happened(run: RunRecord) -> list[str]:
    verdict, outcome = run.verdict, run.outcome
    if verdict is None:
        return ["No verdict was recorded for this run."]
    lines = [
        f"- **{verdict.status.value}** at phase `{verdict.phase.value if verdict.phase else '-'}`, "
        f"category `{verdict.category.value}`"
    ]
    failed = outcome.failed_probe if outcome else None
    if failed is not None and failed.error:
        lines.append(f"- probe `{failed.name}` error: {_code(' '.join(failed.error.split()))}")
    if outcome is not None and outcome.process_died:
        code = f" (exit code {outcome.exit_code})" if outcome.exit_code is not None else ""
        lines.append(f"- the server process died{code}")
    if outcome is not None and outcome.deadline_phase is not None:
        if outcome.stalled_s is not None:
            lines.append(
                f"- it made no progress in `{outcome.deadline_phase.value}` for {outcome.stalled_s:.0f} s"
                + (f"; last progress: {_code(outcome.last_progress)}" if outcome.last_progress else "")
            )
        else:
            lines.append(f"- it was stuck in `{outcome.deadline_phase.value}` until the deadline expired")
    for flag, seen in (outcome.drift if outcome is not None else {}).items():
        lines.append(
            f"- the server ran `--{flag}` as {_code(str(seen.get('used')))}, not the {_code(str(seen.get('asked')))} "
            f"asked: {_code(str(seen.get('evidence')))}"
        )
    if verdict.reason and not verdict.root_cause_line:
        lines.append(f"- {' '.join(verdict.reason.split()).replace('<', '&lt;')}")
    return lines


def _warnings(evidence: Mapping[str, Any]) -> list[str]:
    counts: dict[str, int] = {}
    for warning in evidence.get("warnings", []):
        text = warning.get("text") if isinstance(warning, dict) else str(warning)
        if text:
            counts[text] = counts.get(text, 0) + (int(warning.get("count", 1)) if isinstance(warning, dict) else 1)
    return [f"- {_code(text)}" + (f" (×{n})" if n > 1 else "") for text, n in counts.items()]


def _traceback(evidence: Mapping[str, Any]) -> list[str]:
    tracebacks = evidence.get("tracebacks") or []
    if not tracebacks:
        return []
    first = tracebacks[0]
    lines = trim_traceback(first.get("lines", []))
    more = len(tracebacks) - 1 + int(evidence.get("tracebacks_dropped", 0) or 0)
    notes = []
    if first.get("count", 1) > 1:
        notes.append(f"printed {first['count']} times (once per rank)")
    if more:
        notes.append(f"{more} more traceback(s) in the log")
    head = "#### First traceback" + (f" ({'; '.join(notes)})" if notes else "")
    return [head, "", fence("\n".join(lines), "text"), ""]


def _looks_like(why: Mapping[str, Any] | None) -> list[str]:
    """The public issue the failure resembles most (the classifier's `similar`), as one line."""
    near = (why or {}).get("similar") or []
    if not near:
        return []
    first = near[0]
    title = " ".join(str(first.get("title", "")).split()).replace("<", "&lt;")
    return [f"Looks like {first['source']}: {title} (`{first['category']}`, similarity {first['score']:.2f}).", ""]


def _neighbours(cell: Cell, results: Sequence[CellResult]) -> list[str]:
    found = neighbours(cell, results)
    if not found:
        return ["No cell of this sweep that differs from this one in a single flag value passed."]
    lines = ["These cells of the same sweep differ in one flag value and pass:", "", "| flag | here | passes with |"]
    lines.append("|---|---|---|")
    lines += [f"| `--{flag}` | {_code(_shown(here))} | {_code(_shown(there))} |" for flag, here, there in found]
    return lines


def _repro(run: RunRecord, cell: Cell, sweep: SweepRecord, room: int) -> list[str]:
    try:
        script = render_repro_script(run, cell, sweep)
    except StoreError as exc:
        return [f"No reproduction script: {str(exc).replace('<', '&lt;')}"]
    block = fence(script, "bash")
    if len(block) > room:
        return [
            f"The reproduction script is too long to paste here: attach `orchestrator repro {run.run_id} --script`."
        ]
    return [
        "<details><summary>Standalone script: relaunches this exact command and re-sends the probes "
        "(exit 1 = reproduced)</summary>",
        "",
        block,
        "",
        "</details>",
    ]


def render_bugreport(run: RunRecord, sweep: SweepRecord, results: Sequence[CellResult]) -> str:
    """The issue text for one run of `sweep`, whose cells and verdicts are `results`."""
    cell = next((r.cell for r in results if r.cell.cell_id == run.cell_id), None)
    if cell is None:
        raise StoreError(f"run {run.run_id}: its cell {run.cell_id} is not among the cells of sweep {sweep.sweep_id}")
    verdict = run.verdict
    evidence: Mapping[str, Any] = run.evidence or {}
    category = verdict.category.value if verdict else "no verdict"
    phase = verdict.phase.value if verdict and verdict.phase else "-"
    message = _LOG_PREFIX.sub("", verdict.root_cause_line or verdict.reason if verdict else "").strip()
    title = f"[Bug] {category} at {phase}" + (f": {' '.join(message.split())[:120]}" if message else "")
    sglang = (sweep.versions or {}).get("sglang", "?")
    flags = " ".join(f"--{name} {_shown(cell.flags.get(name))}" for name in cell.axes if name in cell.flags)
    body = [
        f"**Suggested title:** {_code(title)}",
        "",
        "### Describe the bug",
        "",
        f"SGLang {_code(str(sglang))} fails at `{phase}` (`{category}`) with {_code(flags or cell.label)}.",
        "",
        "#### What happened",
        "",
        *_happened(run),
        "",
    ]
    if verdict is not None and verdict.root_cause_line:
        body += ["#### Root-cause line", "", fence(verdict.root_cause_line, "text"), ""]
    body += _looks_like(verdict.evidence if verdict else None)
    body += _traceback(evidence)
    warnings = _warnings(evidence)
    if warnings:
        body += ["#### Warnings in the log", "", *warnings, ""]
    body += ["#### What was sent", "", *_sent(run), ""]
    body += ["#### Neighbouring configurations", "", *_neighbours(cell, results), ""]
    tail = ["### Environment", "", *_environment(run, sweep), "", _footer(run, sweep)]
    if run.command:
        body += ["### Reproduction", "", _command(run, cell), ""]
        room = BODY_MAX - sum(len(line) + 1 for line in [*body, *tail]) - 200
        body += [*_repro(run, cell, sweep, room), ""]
    else:
        body += ["### Reproduction", "", "The run was rejected before launch: the flags above are the whole repro.", ""]
    return "\n".join([*body, *tail]) + "\n"


def _footer(run: RunRecord, sweep: SweepRecord) -> str:
    return (
        f"<sub>Written by orchestrator from run `{run.run_id}` (cell `{run.cell_id}`, sweep `{sweep.sweep_id}`); "
        "secret values are masked.</sub>"
    )
