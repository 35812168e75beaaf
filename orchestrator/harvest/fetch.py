"""Moving log bytes from the host: only new bytes while a launch runs, only what matters of a huge log.

A real launch's log is a few MB and is streamed whole as it grows. A log that grew past the
streaming budget (a server spamming decode lines all night, up to a GB) is harvested on the host
side instead: its head, its tail, and the regions around every line the classifier cares about,
found by `grep` where the file lives, so a few MB cross the wire instead of the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.transport.base import Transport
from orchestrator.transport.shell import quote


class LogTail:
    """Reads a growing remote log from where it left off, returning complete lines only."""

    def __init__(self, transport: Transport, path: str, offset: int = 0):
        self.transport = transport
        self.path = path
        self.offset = offset
        self._partial = b""

    def read_new(self, max_bytes: int = 4 << 20) -> list[bytes]:
        """The complete lines written since the last call (at most `max_bytes` read per call)."""
        data = self.transport.read_range(self.path, self.offset, max_bytes)
        if not data:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return lines

    def drain(self, max_bytes: int = 4 << 20) -> list[bytes]:
        """Everything left, including a last line with no newline (the server is gone)."""
        lines: list[bytes] = []
        while True:
            chunk = self.read_new(max_bytes)
            if not chunk:
                break
            lines.extend(chunk)
        if self._partial:
            lines.append(self._partial)
            self._partial = b""
        return lines


@dataclass(frozen=True)
class HarvestedLog:
    """The parts of a huge log that matter, in file order, and what it cost to move them."""

    lines: list[bytes]
    total_bytes: int
    bytes_moved: int
    skipped_bytes: int


_GREP_LINE = re.compile(rb"^(\d+)[:-](\d+)[:-](.*)$", re.DOTALL)


def _parse_grep(output: bytes) -> list[tuple[int, bytes]]:
    """`grep -n -b` output (matches `N:B:text`, context `N-B-text`, `--` separators) -> (byte offset, line)."""
    found = []
    for raw in output.split(b"\n"):
        match = _GREP_LINE.match(raw)
        if match:
            found.append((int(match.group(2)), match.group(3)))
    return found


def harvest_huge(
    transport: Transport,
    path: str,
    grep_regex: str,
    *,
    head_bytes: int = 256 << 10,
    tail_bytes: int = 1 << 20,
    grep_budget: int = 2 << 20,
    context_before: int = 3,
    context_after: int = 40,
    timeout: float = 120.0,
) -> HarvestedLog:
    """Head, tail and the regions around interesting lines of a log on the host, without copying it."""
    size = transport.file_size(path) or 0
    if size <= head_bytes + tail_bytes:
        data = transport.read_range(path, 0, size)
        return HarvestedLog(data.split(b"\n"), size, len(data), 0)
    head = transport.read_range(path, 0, head_bytes)
    tail_start = size - tail_bytes
    tail = transport.read_range(path, tail_start, tail_bytes)
    # LC_ALL=C keeps grep on its fast byte path; the context after a match covers a traceback.
    command = (
        f"LC_ALL=C grep -a -n -b -E -B{context_before} -A{context_after} -e {quote(grep_regex)} {quote(path)}"
        f" | head -c {grep_budget}"
    )
    grep_out = transport.run(command, timeout=timeout).stdout
    head_lines = head.split(b"\n")[:-1]
    head_end = sum(len(line) + 1 for line in head_lines)
    middle: dict[int, bytes] = {}
    for offset, line in _parse_grep(grep_out):
        if head_end <= offset < tail_start:
            middle[offset] = line
    tail_lines = tail.split(b"\n")[1:]
    lines = head_lines + [middle[k] for k in sorted(middle)] + tail_lines
    moved = len(head) + len(tail) + len(grep_out)
    kept = head_end + sum(len(v) + 1 for v in middle.values()) + sum(len(t) + 1 for t in tail_lines)
    return HarvestedLog(lines, size, moved, max(0, size - kept))
