"""Laying the pass/fail table out in a terminal of any width, or in full for a pipe. Pure: text lines out.

What must always show is the verdict: status, phase and category. The root cause takes what is left
of the line, cut with `…` (or wrapped, for `table --wide`), never the verdict. Where even the
verdict and the axis values cannot share one line (80 columns, four or five axes), each cell takes two
lines: its axis values, then, indented, its verdict and root cause. A pipe gets every row whole
on one line, however long (grep and diff read it; nothing is cut at an assumed width).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich.text import Text

GAP = 2
"""Spaces between columns."""
MIN_CAUSE = 24
"""The narrowest root-cause column worth showing beside the rest; narrower, the two-line layout is used."""
TWO_LINE_CAUSE = 40
"""In the two-line layout, attempts and seconds to ready give way until the cause has this many columns."""
INDENT = 4
MIN_BESIDE = 30
"""Fewer columns than this left after the verdict, and the cause moves to a line of its own."""
"""Indent of a cell's verdict line in the two-line layout."""

Kind = Literal["axis", "verdict", "extra", "cause"]


@dataclass(frozen=True)
class Column:
    """One column: its header, what it holds, and how it aligns."""

    header: str
    kind: Kind
    right: bool = False


@dataclass(frozen=True)
class Cell:
    """One value of a row, with its rich style ("" for none)."""

    text: str
    style: str = ""


@dataclass
class Layout:
    """The lines of a laid-out table and whether any root cause was cut short."""

    lines: list[Text] = field(default_factory=list)
    cut: bool = False
    hidden: tuple[str, ...] = ()
    """Headers of the columns left out to keep the root cause readable at this width."""


def _header_pieces(header: str) -> list[str]:
    """`attention-backend` -> [`attention-`, `backend`]: where a header may break onto a second line."""
    return re.findall(r"[^-\s]+-?", header) or [header]


def _two_line_width(header: str) -> int:
    """The narrowest width at which a header fits on two lines, broken at a hyphen."""
    pieces = _header_pieces(header)
    splits = [max(len("".join(pieces[:k])), len("".join(pieces[k:]))) for k in range(1, len(pieces))]
    return min(splits, default=len(header))


def _wrap_header(header: str, width: int) -> list[str]:
    lines: list[str] = []
    for piece in _header_pieces(header):
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return lines


@dataclass(frozen=True)
class _Plan:
    columns: tuple[int, ...]
    """Indexes of the columns shown on the first line."""
    widths: dict[int, int]
    broken_headers: bool
    two_line: bool


class Grid:
    """Columns and rows, laid out by `render(width)`; `width=None` is a pipe: every row whole on one line."""

    def __init__(self, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]):
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.cause = next((i for i, c in enumerate(self.columns) if c.kind == "cause"), None)

    def _natural(self, index: int, broken: bool) -> int:
        column = self.columns[index]
        head = _two_line_width(column.header) if broken and column.kind == "axis" else len(column.header)
        return max([head, *(len(r[index].text) for r in self.rows)])

    def _has_cause(self) -> bool:
        return self.cause is not None and any(r[self.cause].text for r in self.rows)

    def plan(self, width: int | None) -> _Plan:
        """Choose the layout: one line per cell if the cause keeps MIN_CAUSE columns, else two lines per cell."""
        everything = tuple(i for i in range(len(self.columns)) if i != self.cause)
        if width is None:
            return _Plan(everything, {i: self._natural(i, False) for i in everything}, False, False)
        need = MIN_CAUSE if self._has_cause() else len("root cause")
        extras = [i for i, c in enumerate(self.columns) if c.kind == "extra"]
        for broken in (False, True):
            # Less useful at a glance than the cause: `table --wide` or csv shows them.
            for dropped in range(len(extras) + 1):
                shown = tuple(i for i in everything if i not in extras[len(extras) - dropped :])
                widths = {i: self._natural(i, broken) for i in shown}
                fixed = sum(widths.values()) + GAP * len(shown)
                if width - fixed >= need:
                    return _Plan(shown, widths, broken, False)
        axes = tuple(i for i in everything if self.columns[i].kind == "axis")
        widths = {i: self._natural(i, True) for i in everything}
        for dropped in range(len(extras) + 1):
            verdict = tuple(i for i in everything if i not in axes and i not in extras[len(extras) - dropped :])
            if width - INDENT - sum(widths[i] + GAP for i in verdict) >= TWO_LINE_CAUSE:
                break
        return _Plan(verdict, widths, True, True)

    def render(self, width: int | None, *, wrap: bool = False) -> Layout:
        """The table's lines; with `wrap`, long root causes continue on more lines instead of being cut."""
        plan = self.plan(width)
        hidden = (c.header for i, c in enumerate(self.columns) if c.kind == "extra" and i not in plan.columns)
        layout = Layout(hidden=tuple(hidden))
        if plan.two_line:
            self._two_line(plan, width or 0, wrap, layout)
        else:
            self._one_line(plan, width, wrap, layout)
        return layout

    def _one_line(self, plan: _Plan, width: int | None, wrap: bool, layout: Layout) -> None:
        shown = list(plan.columns)
        left = sum(plan.widths[i] + GAP for i in shown)
        cause_width = None if width is None else width - left
        heads = self._header_lines(shown, plan)
        if self.cause is not None:
            heads[-1].append(self.columns[self.cause].header)
        for head in heads:
            layout.lines.append(Text(_join(head, shown, plan, self.columns), style="bold"))
        for row in self.rows:
            first = _cells_text(row, shown, plan.widths, self.columns)
            causes = self._cause_lines(row, cause_width, wrap, layout)
            first.append(causes[0])
            first.rstrip()
            layout.lines.append(first)
            for more in causes[1:]:
                layout.lines.append(Text(" " * left + more))

    def _two_line(self, plan: _Plan, width: int, wrap: bool, layout: Layout) -> None:
        axes = [i for i, c in enumerate(self.columns) if c.kind == "axis"]
        verdict = list(plan.columns)
        axis_width = sum(plan.widths[i] + GAP for i in axes) - GAP
        joined = axis_width > width
        if joined:
            # Too many axes for one line even with folded headers: the values, wrapped, under a legend.
            layout.lines.append(Text("cell: " + ", ".join(self.columns[i].header for i in axes), style="bold"))
        else:
            for head in self._header_lines(axes, plan):
                layout.lines.append(Text(_join(head, axes, plan, self.columns), style="bold"))
        cause_at = INDENT + sum(plan.widths[i] + GAP for i in verdict)
        beside = width - cause_at >= MIN_BESIDE
        verdict_head = [self.columns[i].header for i in verdict]
        if self.cause is not None and beside:
            verdict_head.append(self.columns[self.cause].header)
        layout.lines.append(Text(" " * INDENT + _join(verdict_head, verdict, plan, self.columns), style="bold"))
        if not beside:
            # No room after the verdict: the cause takes a line of its own, under the verdict.
            cause_at = INDENT
            if self.cause is not None:
                layout.lines.append(Text(" " * INDENT + self.columns[self.cause].header, style="bold"))
        cause_width = max(width - cause_at, MIN_BESIDE)
        for row in self.rows:
            if joined:
                label = " ".join(row[i].text for i in axes)
                layout.lines.extend(Text(line) for line in textwrap.wrap(label, width) or [""])
            else:
                line = _cells_text(row, axes, plan.widths, self.columns)
                line.rstrip()
                layout.lines.append(line)
            second = Text(" " * INDENT)
            second.append_text(_cells_text(row, verdict, plan.widths, self.columns))
            causes = self._cause_lines(row, cause_width, wrap, layout)
            if beside:
                second.append(causes.pop(0))
            second.rstrip()
            layout.lines.append(second)
            layout.lines.extend(Text(" " * cause_at + more) for more in causes if more)

    def _header_lines(self, shown: Sequence[int], plan: _Plan) -> list[list[str]]:
        """Header rows: one, or several where axis headers break at their hyphens."""
        columns = [
            _wrap_header(self.columns[i].header, plan.widths[i])
            if plan.broken_headers and self.columns[i].kind == "axis"
            else [self.columns[i].header]
            for i in shown
        ]
        depth = max((len(c) for c in columns), default=1)
        # Bottom-aligned, like a spreadsheet's header: the last piece sits on the line above the values.
        padded = [[""] * (depth - len(c)) + c for c in columns]
        return [[c[line] for c in padded] for line in range(depth)]

    def _cause_lines(self, row: Sequence[Cell], width: int | None, wrap: bool, layout: Layout) -> list[str]:
        if self.cause is None:
            return [""]
        text = row[self.cause].text
        if width is None or len(text) <= width:
            return [text]
        if wrap:
            return textwrap.wrap(text, max(1, width), break_on_hyphens=False) or [""]
        layout.cut = True
        return [text[: max(0, width - 1)] + "…"]


def _join(values: Sequence[str], shown: Sequence[int], plan: _Plan, columns: Sequence[Column]) -> str:
    """A header row: each value padded to its column (the last, the cause's, as it is)."""
    parts = [
        f"{v:>{plan.widths[i]}}" if columns[i].right else f"{v:<{plan.widths[i]}}"
        for v, i in zip(values, shown, strict=False)
    ]
    parts.extend(values[len(shown) :])
    return (" " * GAP).join(parts).rstrip()


def _cells_text(row: Sequence[Cell], shown: Sequence[int], widths: dict[int, int], columns: Sequence[Column]) -> Text:
    """The row's values in these columns, each padded to its width and followed by the gap, styles kept."""
    line = Text()
    for i in shown:
        cell = row[i]
        pad = " " * (widths[i] - len(cell.text))
        if columns[i].right:
            line.append(pad)
        line.append(cell.text, style=cell.style)
        line.append(("" if columns[i].right else pad) + " " * GAP)
    return line
