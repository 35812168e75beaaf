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


NOISE: tuple[str, ...] = ("Decode batch. ", "Prefill batch. ", 'HTTP/1.1" 200 ')
"""Serving lines SGLang prints by the million and the classifier never needs: dropped first, on the host."""
REPEATS_KEPT = 20
"""Copies of one line (its timestamp aside) kept from the middle: a warning repeated all night is one clue."""

# Stage 1 drops the noise and numbers what is left with the file's own line numbers and byte offsets, so
# stage 2's context (-B/-A) spans neighbouring lines that matter, not decode chatter; stage 3 caps repeats.
# LC_ALL=C keeps grep on its fast byte path (~0.6 s for 1 GB here, where the whole regex over every line
# of the file took ~3.5 s: a literal like `code` of the harvest's literals matches every `Decode batch`).
_DEDUP = r'{k = $0; sub(/^[0-9]+:[0-9]+:/, "", k); sub(/^\[[^]]*\] ?/, "", k)} length(k) < 2 || c[k]++ < N'


@dataclass(frozen=True)
class HarvestedLog:
    """The parts of a huge log that matter, in file order, and what it cost to move them."""

    lines: list[bytes]
    line_numbers: list[int | None]
    """Each line's number in the file (None where it could not be known)."""
    total_bytes: int
    bytes_moved: int
    skipped_bytes: int


_GREP_LINE = re.compile(rb"^(\d+)[:-](\d+)[:-](.*)$", re.DOTALL)


def _parse_grep(output: bytes) -> list[tuple[int, int, bytes]]:
    """`grep -n -b` output (`N:B:text`, context `N-B-text`, `--` separators) -> (line number, byte offset, line)."""
    found = []
    for raw in output.split(b"\n"):
        match = _GREP_LINE.match(raw)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), match.group(3)))
    return found


def host_filter_command(
    path: str, grep_regex: str, *, context_before: int = 3, context_after: int = 40, budget: int = 2 << 20
) -> str:
    """The host-side pipeline: `N:B:line` for the lines around matches of `grep_regex`, noise and repeats dropped."""
    noise = " ".join(f"-e {quote(n)}" for n in NOISE)
    return (
        f"LC_ALL=C grep -a -n -b -v -F {noise} -- {quote(path)}"
        f" | LC_ALL=C grep -a -E -B{context_before} -A{context_after} -e {quote(grep_regex)}"
        f" | LC_ALL=C awk -v N={REPEATS_KEPT} {quote(_DEDUP)}"
        f" | head -c {budget}"
    )


def harvest_huge(
    transport: Transport,
    path: str,
    grep_regex: str,
    *,
    head_bytes: int = 256 << 10,
    tail_bytes: int = 1 << 20,
    grep_budget: int = 2 << 20,
    timeout: float = 120.0,
) -> HarvestedLog:
    """Head, tail and the regions around interesting lines of a log on the host, without copying it."""
    size = transport.file_size(path) or 0
    if size <= head_bytes + tail_bytes:
        data = transport.read_range(path, 0, size)
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        return HarvestedLog(lines, [*range(1, len(lines) + 1)], size, len(data), 0)
    head = transport.read_range(path, 0, head_bytes)
    tail_start = size - tail_bytes
    tail = transport.read_range(path, tail_start, tail_bytes)
    grep_out = transport.run(host_filter_command(path, grep_regex, budget=grep_budget), timeout=timeout).stdout
    if len(grep_out) >= grep_budget:
        grep_out = grep_out[: grep_out.rfind(b"\n") + 1]  # the budget cut the last line short
    found = _parse_grep(grep_out)
    head_lines = head.split(b"\n")[:-1]
    head_end = sum(len(line) + 1 for line in head_lines)
    # The tail's first line is partial; its others start right after it.
    tail_cut = tail.find(b"\n") + 1
    tail_lines = tail[tail_cut:].split(b"\n")
    if tail_lines and not tail_lines[-1]:
        tail_lines.pop()
    middle = {offset: (number, line) for number, offset, line in found if head_end <= offset < tail_start + tail_cut}
    lines = head_lines + [middle[k][1] for k in sorted(middle)] + tail_lines
    numbers: list[int | None] = [*range(1, len(head_lines) + 1), *(middle[k][0] for k in sorted(middle))]
    numbers += _tail_numbers(tail_lines, tail_start + tail_cut, found)
    moved = len(head) + len(tail) + len(grep_out)
    kept = head_end + sum(len(v[1]) + 1 for v in middle.values()) + sum(len(t) + 1 for t in tail_lines)
    return HarvestedLog(lines, numbers, size, moved, max(0, size - kept))


def _tail_numbers(tail_lines: list[bytes], start: int, found: list[tuple[int, int, bytes]]) -> list[int | None]:
    """Line numbers of the tail, anchored on any line grep numbered inside it (None without one)."""
    starts = []
    offset = start
    for line in tail_lines:
        starts.append(offset)
        offset += len(line) + 1
    index = {o: i for i, o in enumerate(starts)}
    anchor = next(((number, index[o]) for number, o, _ in found if o in index), None)
    if anchor is None:
        return [None] * len(tail_lines)
    number, at = anchor
    return [number - at + i for i in range(len(tail_lines))]
