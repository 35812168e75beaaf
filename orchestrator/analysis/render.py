"""Comparisons and explanations as terminal text, GitHub markdown, or JSON; pure functions to strings.

`term` is built from rich renderables (`comparison_renderable`, `explanation_renderable`) so the
CLI can print them to its own console in colour; `render_*` turns them into plain strings.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from orchestrator.analysis.compare import CellChange, Comparison, message_of
from orchestrator.analysis.explain import CLEAR, Explanation, Finding, GroupReport
from orchestrator.analysis.inputs import CellOutcome
from orchestrator.analysis.speed import SpeedChange
from orchestrator.safeconsole import SafeConsole

FORMATS = ("term", "md", "json")
SUMMARY_FINDINGS = 3
"""Clear findings per group in the markdown summary; the other formats list them all."""
ROOT_CAUSE_CHARS = 160
"""Root-cause lines are cut here in tables; the JSON keeps them whole."""
_BUCKETS = ("regressions", "fixes", "changed", "added", "removed", "unverified")


def render_comparison(comparison: Comparison, fmt: str = "term", *, width: int = 100, color: bool = False) -> str:
    """`comparison` as `term`, `md` or `json` text."""
    if fmt == "json":
        return json.dumps(comparison.to_dict(), indent=2)
    if fmt == "md":
        return _comparison_md(comparison)
    if fmt == "term":
        return to_text(comparison_renderable(comparison), width=width, color=color)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def render_explanation(explanation: Explanation, fmt: str = "term", *, width: int = 100, color: bool = False) -> str:
    """`explanation` as `term`, `md` (a summary to sit above the table in a comment) or `json` text."""
    if fmt == "json":
        return json.dumps(explanation.to_dict(), indent=2)
    if fmt == "md":
        return _explanation_md(explanation)
    if fmt == "term":
        return to_text(explanation_renderable(explanation), width=width, color=color)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def to_text(renderable: RenderableType, *, width: int = 100, color: bool = False) -> str:
    """Render a rich renderable to a string, with ANSI colours only when asked."""
    # A SafeConsole: log and flag text in the tables shows its control characters before the colours are added.
    console = SafeConsole(file=io.StringIO(), width=width, record=True, force_terminal=color, color_system="standard")
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text(styles=color).splitlines()) + "\n"


def comparison_renderable(c: Comparison) -> RenderableType:
    """The comparison as rich tables, one per kind of change, then timing and environment."""
    counts = ", ".join(f"{len(getattr(c, name))} {name}" for name in _BUCKETS[:5])
    parts: list[RenderableType] = [
        Text(f"{c.before_id} -> {c.after_id}: {c.matched} cells matched; {counts}", style="bold")
    ]
    for name in _BUCKETS:
        changes: tuple[CellChange, ...] = getattr(c, name)
        if changes:
            table = Table(title=f"{name} ({len(changes)})", title_justify="left", expand=False)
            for column in ("cell", "before", "after"):
                table.add_column(column, overflow="fold")
            for change in changes:
                why = name == "changed"
                table.add_row(change.label, _outcome(change.before, why), _outcome(change.after, why))
            parts.append(table)
    if c.ready_changes:
        table = Table(title="time to ready", title_justify="left")
        for column in ("cell", "before s", "after s", "change s"):
            table.add_column(column, overflow="fold")
        for r in c.ready_changes:
            table.add_row(r.label, f"{r.before_s:.1f}", f"{r.after_s:.1f}", f"{r.delta_s:+.1f}")
        parts.append(table)
    speed = _speed_rows(c)
    if speed:
        table = Table(title="speed, output tok/s (beyond both sweeps' noise bands)", title_justify="left")
        for column in ("cell", "before", "after", "change"):
            table.add_column(column, overflow="fold")
        for row in speed:
            table.add_row(*row)
        parts.append(table)
    if c.env_diff:
        table = Table(title="environment", title_justify="left")
        for column in ("name", "before", "after"):
            table.add_column(column, overflow="fold")
        for name, (before, after) in c.env_diff.items():
            table.add_row(name, before or "-", after or "-")
        parts.append(table)
    if not any(getattr(c, name) for name in _BUCKETS) and not c.ready_changes and not speed:
        parts.append(Text(f"no change in the {c.matched} matched cells"))
    parts.extend(Text(f"note: {note}", style="yellow") for note in c.notes)
    return Group(*parts)


def explanation_renderable(e: Explanation) -> RenderableType:
    """Per failure group: a ranked table of findings with counts, then the notes; flaky cells last."""
    parts: list[RenderableType] = []
    for group in e.groups:
        table = Table(title=_group_title(group), title_justify="left")
        for column in ("#", "finding", "failing", "passing", "score"):
            table.add_column(column, overflow="fold")
        for i, f in enumerate(group.findings, 1):
            table.add_row(
                str(i), _marked(f), f"{f.fail_with}/{f.fail_total}", f"{f.pass_with}/{f.pass_total}", f"{f.score:.2f}"
            )
        parts.append(table if group.findings else Text(_group_title(group), style="bold"))
        parts.extend(Text(f"  note: {note}", style="yellow") for note in group.notes)
    if e.flaky:
        parts.append(Text(f"flaky, left out of every group: {_flaky(e.flaky)}", style="yellow"))
    if not e.groups:
        parts.append(Text(f"no cell failed ({e.pass_total} passed), nothing to explain"))
    if e.speed_effects:
        table = Table(title="speed: flag values that move output tok/s beyond the noise", title_justify="left")
        for column in ("#", "finding", "pairs", "ratio"):
            table.add_column(column, overflow="fold")
        for i, effect in enumerate(e.speed_effects, 1):
            table.add_row(str(i), effect.text, str(effect.pairs), f"{effect.ratio:.2f}")
        parts.append(table)
    elif e.speed_measured:
        parts.append(Text(_no_speed_effect(e)))
    return Group(*parts)


def _comparison_md(c: Comparison) -> str:
    counts = ", ".join(f"**{len(getattr(c, name))}** {name}" for name in _BUCKETS[:5])
    lines = [f"### Compare `{c.before_id}` → `{c.after_id}`", "", f"{counts} ({c.matched} cells matched)", ""]
    for name in _BUCKETS:
        changes: tuple[CellChange, ...] = getattr(c, name)
        if changes:
            lines += [f"#### {name.capitalize()} ({len(changes)})", ""]
            lines += _md_table(
                ("cell", "before", "after"),
                [
                    (ch.label, _outcome(ch.before, name == "changed"), _outcome(ch.after, name == "changed"))
                    for ch in changes
                ],
            )
    if c.ready_changes:
        lines += ["#### Time to ready", ""]
        lines += _md_table(
            ("cell", "before s", "after s", "change s"),
            [(r.label, f"{r.before_s:.1f}", f"{r.after_s:.1f}", f"{r.delta_s:+.1f}") for r in c.ready_changes],
        )
    if _speed_rows(c):
        lines += ["#### Speed, output tok/s (beyond both sweeps' noise bands)", ""]
        lines += _md_table(("cell", "before", "after", "change"), _speed_rows(c))
    if c.env_diff:
        lines += ["#### Environment", ""]
        lines += _md_table(("name", "before", "after"), [(n, b or "–", a or "–") for n, (b, a) in c.env_diff.items()])
    if not any(getattr(c, name) for name in _BUCKETS) and not c.ready_changes and not _speed_rows(c):
        lines += [f"No change in the {c.matched} matched cells.", ""]
    lines += [f"> {_escape(note)}" for note in c.notes]
    return "\n".join(lines).rstrip() + "\n"


def _explanation_md(e: Explanation) -> str:
    speed = [f"- **speed**: {_escape(effect.text)}" for effect in e.speed_effects[:SUMMARY_FINDINGS]]
    if not speed and e.speed_measured:
        speed = [f"- **speed**: {_no_speed_effect(e)}"]
    if not e.groups:
        head = f"**Why cells fail** (`{e.sweep_id}`): no cell failed ({e.pass_total} passed)."
        return "\n".join([head, *speed]) + "\n"
    lines = [f"**Why cells fail** (`{e.sweep_id}`, failing cells set against {e.pass_total} passing):", ""]
    for group in e.groups:
        # A clear finding makes weaker ones noise in a summary; without one, the best is still worth a look.
        numbered = list(enumerate(group.findings, 1))
        clear = [(i, f) for i, f in numbered if f.separation >= CLEAR or f.confirmed] or numbered[:1]
        lead = "; ".join(f"({i}) {_finding_md(f)}" for i, f in clear[:SUMMARY_FINDINGS])
        lead = lead or "nothing separates it"
        lines.append(f"- **{group.category}** ({len(group.failing)} failing): {lead}")
        lines += [f"  - {_escape(note)}" for note in group.notes]
    if e.flaky:
        lines.append(f"- flaky, left out of every group: {_escape(_flaky(e.flaky))}")
    return "\n".join([*lines, *speed]) + "\n"


def _no_speed_effect(e: Explanation) -> str:
    return f"no flag value moves output tok/s beyond the noise ({e.speed_measured} measured passing cells)"


def _speed_rows(c: Comparison) -> list[tuple[str, str, str, str]]:
    """Speed regressions, then improvements: cell, before and after (median ± half the band), change."""

    def shown(band: SpeedChange) -> tuple[str, str, str, str]:
        before, after = band.before, band.after
        return (
            band.label,
            f"{before.median:.0f} ± {before.spread:.0f}",
            f"{after.median:.0f} ± {after.spread:.0f}",
            f"{band.change:+.1%}" + (" (slower)" if band.change < 0 else " (faster)"),
        )

    return [shown(s) for s in (*c.speed_regressions, *c.speed_improvements)]


def _marked(f: Finding) -> str:
    """The finding's text, with `(confirmed)` when an adaptive sweep proved it."""
    return f"{f.text} (confirmed)" if f.confirmed else f.text


def _finding_md(f: Finding) -> str:
    counts = f"{f.fail_with}/{f.fail_total} failing, {f.pass_with}/{f.pass_total} passing"
    if f.confirmed:
        counts += ", confirmed"
    if f.warning is not None:
        return f"{'' if f.present else 'no '}warning {_code(f.warning)} ({counts})"
    return f"{_code(f.text)} ({counts})"


def _group_title(group: GroupReport) -> str:
    return f"{group.category}: {len(group.failing)} failing vs {group.pass_total} passing cells"


def _outcome(cell: CellOutcome | None, why: bool = False) -> str:
    """Status and category; with `why`, the root-cause line too (what tells changed failures apart)."""
    if cell is None:
        return "-"
    text = cell.status.value if cell.category.value == "healthy" else f"{cell.status.value} {cell.category.value}"
    if cell.flaky:
        text += f" ({cell.passes}/{cell.attempts} passed)"
    if why and cell.root_cause_line:
        line = message_of(cell.root_cause_line)
        text += f": {line[:ROOT_CAUSE_CHARS]}{'…' if len(line) > ROOT_CAUSE_CHARS else ''}"
    return text


def _flaky(cells: Iterable[CellOutcome]) -> str:
    return ", ".join(f"{c.label} ({c.passes}/{c.attempts} passed)" for c in cells)


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_escape(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _code(text: str) -> str:
    """A markdown code span that survives backticks inside the text."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _escape(text: str) -> str:
    """Keep log text from turning into markdown: no stray emphasis, html or line breaks."""
    return text.replace("\n", " ").replace("<", "&lt;").replace("*", "\\*")
