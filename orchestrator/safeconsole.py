"""A rich Console that shows, never obeys, the control characters of the text it prints (orchestrator/textsafe.py).

Kept apart from textsafe.py so that what prints without rich (`classify`) does not load it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Span, Text

from orchestrator.textsafe import CONTROL, MAX_SHOWN, GuardedStream, kept, shown, visible


def visible_text(text: Text) -> Text:
    """A rich Text made visible as `visible` does, its styles kept on the same characters."""
    plain = text.plain
    if not CONTROL.search(plain):
        return text
    # Each replacement lengthens the text after it: shift every span boundary by what came before it.
    starts: list[int] = []
    grown: list[int] = []
    for match in CONTROL.finditer(plain):
        starts.append(match.end())
        grown.append((grown[-1] if grown else 0) + len(shown(match)) - 1)

    def moved(index: int) -> int:
        before = bisect.bisect_right(starts, index)
        return index + (grown[before - 1] if before else 0)

    result = text.copy()
    result.plain = visible(plain)
    result.spans = [Span(moved(span.start), moved(span.end), span.style) for span in text.spans]
    return result


def elide_text(text: Text, limit: int = MAX_SHOWN) -> Text:
    """A rich Text cut as `elide` cuts a string, its styles kept on the parts shown."""
    if len(text) <= limit:
        return text
    keep = kept(limit)
    cut = text[:keep]
    cut.append(f" … [{len(text) - 2 * keep} of {len(text)} characters not shown] … ", style="dim")
    cut.append_text(text[len(text) - keep :])
    return cut


class SafeConsole(Console):
    """A rich Console that shows every control character of the text it prints, and elides very long text.

    The text of each segment is made visible just before rich renders its style, so colours and bold
    still work while a log line's own escape sequences print as `^[[2J`. Rich's control segments (the
    live panel moving the cursor) are its own and pass. Highlighting is off unless asked for: on a
    100 KB flag value rich's highlighter takes minutes of CPU.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("highlight", False)
        super().__init__(*args, **kwargs)

    @property
    def file(self) -> IO[str]:
        found = super().file
        return found.inner if isinstance(found, GuardedStream) else found

    @file.setter
    def file(self, new_file: IO[str]) -> None:
        self._file = new_file

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """The string as rich would render it, made visible and cut to MAX_SHOWN characters."""
        # Markup is parsed first (a cut could split a `[bold]...[/]` pair); the cut is of the text it gives.
        return visible_text(elide_text(super().render_str(text, **kwargs)))

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Render as rich does, a Text (a table's cell too) made visible and cut first, so widths are right."""
        if isinstance(renderable, Text):
            renderable = visible_text(elide_text(renderable))
        return super().render(renderable, options)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_visible_segments(buffer))


def _visible_segments(buffer: Iterable[Segment]) -> Iterable[Segment]:
    for text, style, control in buffer:
        yield Segment(text, style, control) if control else Segment(visible(text), style)
