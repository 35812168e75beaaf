"""Text others control (log lines, prompts, model names, flag values) made safe to show on a terminal.

A server log can hold any byte: ESC sequences that clear the screen, retitle the window, move the
cursor back over a `fail` verdict and print something else in its place. Every control character
is therefore shown, never obeyed: C0 in caret notation as `cat -v` writes it (ESC is `^[`, BEL `^G`,
CR `^M`, DEL `^?`), C1 and the invisible bidirectional overrides and line separators as `\\x9b`,
`\\u202e`. Newline and tab stay as they are; a CR just before a newline (a Windows line end) is dropped.

`SafeConsole` applies this to every piece of text it prints, before rich adds its own styling, and
`GuardedStream` to everything else written to stdout/stderr. What is shown of one value is capped
(`elide`): a 200 KB flag value would otherwise cost seconds of layout for nothing anyone reads.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import IO, Any, TextIO

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Span, Text

MAX_SHOWN = 4000
"""The most characters shown of one printed string or text (elided in the middle beyond)."""

_CONTROL = re.compile("\r(?=\n)|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0D and match.end() < len(match.string) and match.string[match.end()] == "\n":
        return ""  # CR LF: the CR moves nothing the LF does not
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character shown as text (`^[` for ESC), so a terminal obeys none of them."""
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def visible_text(text: Text) -> Text:
    """A rich Text made visible as `visible` does, its styles kept on the same characters."""
    plain = text.plain
    if not _CONTROL.search(plain):
        return text
    # Each replacement lengthens the text after it: shift every span boundary by what came before it.
    starts: list[int] = []
    grown: list[int] = []
    for match in _CONTROL.finditer(plain):
        starts.append(match.end())
        grown.append((grown[-1] if grown else 0) + len(_shown(match)) - 1)

    def moved(index: int) -> int:
        before = bisect.bisect_right(starts, index)
        return index + (grown[before - 1] if before else 0)

    shown = text.copy()
    shown.plain = visible(plain)
    shown.spans = [Span(moved(span.start), moved(span.end), span.style) for span in text.spans]
    return shown


def _kept(limit: int) -> int:
    # Each end's share, the note about the cut included in the limit: cut text is not cut again.
    return max((limit - 64) // 2, 1)


def elide(text: str, limit: int = MAX_SHOWN) -> str:
    """`text`, or its head and tail with the middle replaced by how much was left out when it is longer than `limit`."""
    if len(text) <= limit:
        return text
    keep = _kept(limit)
    return f"{text[:keep]} … [{len(text) - 2 * keep} of {len(text)} characters not shown] … {text[-keep:]}"


def elide_text(text: Text, limit: int = MAX_SHOWN) -> Text:
    """A rich Text cut as `elide` cuts a string, its styles kept on the parts shown."""
    if len(text) <= limit:
        return text
    keep = _kept(limit)
    cut = text[:keep]
    cut.append(f" … [{len(text) - 2 * keep} of {len(text)} characters not shown] … ", style="dim")
    cut.append_text(text[len(text) - keep :])
    return cut


_SGR = re.compile(r"(\x1b\[[0-9;]*m)")
"""Select Graphic Rendition: colour and weight, which is all `typer.style` writes. It cannot move the
cursor, clear or retitle anything; what it could hide is ended with the write (see GuardedStream)."""
_RESETS = ("\x1b[0m", "\x1b[m")


def visible_but_colours(text: str) -> str:
    """`text` made visible except its colour sequences (SGR), ended by a reset if the last one does not reset."""
    parts = _SGR.split(text)
    if len(parts) == 1:
        return visible(text)
    shown = "".join(part if index % 2 else visible(part) for index, part in enumerate(parts))
    return shown if parts[-2] in _RESETS else shown + _RESETS[0]


class GuardedStream:
    """A text stream (stdout, stderr) that shows the control characters written to it instead of sending them.

    The backstop for output that does not go through a SafeConsole (`typer.echo`, a library's print).
    Colour sequences pass, since that is how `typer.style` styles a line, and each write that sets a
    colour ends with a reset: whatever a colour could hide ends with the write it came in. Text from a
    log must still be made visible before it is styled (`visible`), or its colours reach the terminal.
    A SafeConsole writes to `inner` directly: its text is already made visible, and its own styling (the
    live panel's cursor moves too) must reach the terminal.
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        """Write `text` with its control characters shown; returns the length given, as a stream does."""
        self.inner.write(visible_but_colours(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        # flush, isatty, fileno, encoding, errors, ...: the stream's own. A bytes `buffer` is not offered:
        # a writer that finds one writes around the guard.
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self.inner, name)


def guard_stream(stream: TextIO) -> TextIO:
    """`stream` guarded (once: a guarded stream is returned as it is)."""
    return stream if isinstance(stream, GuardedStream) else GuardedStream(stream)  # type: ignore[return-value]


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
