"""Text others control (log lines, prompts, model names, flag values) made safe to show on a terminal.

A server log can hold any byte: ESC sequences that clear the screen, retitle the window, move the
cursor back over a `fail` verdict and print something else in its place. Every control character
is therefore shown, never obeyed: C0 in caret notation as `cat -v` writes it (ESC is `^[`, BEL `^G`,
CR `^M`, DEL `^?`), C1 and the invisible bidirectional overrides and line separators as `\\x9b`,
`\\u202e`. Newline and tab stay as they are; a CR just before a newline (a Windows line end) is dropped.

`GuardedStream` applies this to everything written to stdout/stderr, and orchestrator/safeconsole.py's
`SafeConsole` to every piece of text a rich console prints, before rich adds its own styling. What is
shown of one value is capped (`elide`): a 200 KB flag value would otherwise cost seconds of layout for
nothing anyone reads. This module imports no terminal library: `classify` starts without one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO

MAX_SHOWN = 4000
"""The most characters shown of one printed string or text (elided in the middle beyond)."""

CONTROL = re.compile("\r(?=\n)|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def shown(match: re.Match[str]) -> str:
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
    return CONTROL.sub(shown, text) if CONTROL.search(text) else text


def kept(limit: int) -> int:
    # Each end's share, the note about the cut included in the limit: cut text is not cut again.
    return max((limit - 64) // 2, 1)


def elide(text: str, limit: int = MAX_SHOWN) -> str:
    """`text`, or its head and tail with the middle replaced by how much was left out when it is longer than `limit`."""
    if len(text) <= limit:
        return text
    keep = kept(limit)
    return f"{text[:keep]} … [{len(text) - 2 * keep} of {len(text)} characters not shown] … {text[-keep:]}"


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
    """`stream` guarded when it is a terminal (once: a guarded stream is returned as it is).

    A file or a pipe gets the text as written: CSV, JSON and Markdown are data (JSON escapes its own
    control characters), and the human formats are made visible where they are made.
    """
    if isinstance(stream, GuardedStream) or not _is_terminal(stream):
        return stream
    return GuardedStream(stream)  # type: ignore[return-value]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a stand-in without isatty, or a closed stream
        return False


def guard_standard_streams() -> None:
    """From now on, show the control characters written to stdout and stderr (terminals) instead of sending them."""
    sys.stdout = guard_stream(sys.stdout)
    sys.stderr = guard_stream(sys.stderr)
