"""Which ports a launch may take on a host: the candidates, what a survey of the host says of them, the pick.

Pure apart from the survey's command text, which the session runs on the host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from orchestrator.transport.shell import quote

PORT_SPACING = 1100
"""SGLang derives NCCL and other internal ports from --port (+100..1000); closer servers cross-talk."""

# Prints the kernel's ephemeral range, then each candidate some socket uses as its local port, or some live process
# names on its command line (`--port N`, `--port=N`): a server binds its port only once its weights are loaded,
# minutes after its launch, and until then only its command line says the port is taken, by another pool entry on
# the same machine, or another user's sweep. A socket in TIME_WAIT (st 06) counts only inside the ephemeral range:
# there it is a client's (an outgoing connection's local port, such as the orchestrator's own probe requests to its
# servers, which close first: a demo sweep keeps ~600 of them at once), and Linux refuses a bind next to another
# socket that did not set SO_REUSEADDR, which a client's never does; outside the range it is a server's own
# (SGLang's uvicorn, like the simulated host, binds with SO_REUSEADDR, so its last run's TIME_WAIT never blocks the
# port). An awk over /proc rather than a Python start: it runs before every launch.
_BUSY_AWK = r"""
function num(hex, i, v) {
  for (i = 1; i <= length(hex); i++) v = v * 16 + index("0123456789ABCDEF", substr(hex, i, 1)) - 1
  return v
}
NR == 1 { low = $1 + 0; high = $2 + 0; print "range", $1, $2; next }
$1 ~ /:$/ {
  n = split($2, a, ":"); port = num(a[n])
  if ($4 != "06" || (port >= low && port <= high)) busy[port] = 1
  next
}
prev == "--port" && $0 ~ /^[0-9]+$/ { busy[$0 + 0] = 1 }
/^--port=[0-9]+$/ { busy[substr($0, 8) + 0] = 1 }
{ prev = $0 }
END { k = split(cands, c, " "); for (i = 1; i <= k; i++) if (c[i] in busy) print "busy", c[i] }
"""
# Every process's arguments, one a line (a process that exits meanwhile is skipped by cat, quietly).
_PORT_TABLES = (
    "{ cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0 0;"
    " cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; }"
)


@dataclasses.dataclass(frozen=True)
class PortSurvey:
    """What the host said of the candidate ports at one moment."""

    busy: frozenset[int]
    """Candidates some socket uses as its local port (one in TIME_WAIT only inside the ephemeral range: a client's),
    or a live process names as its `--port`."""
    ephemeral: tuple[int, int]
    """The kernel's range for outgoing connections' local ports ((0, 0) when unknown)."""


def candidates(port_base: int) -> list[int]:
    """The ports a launch may take, on one grid PORT_SPACING wide so that any two are far enough apart."""
    return list(range(port_base, 65000 - PORT_SPACING, PORT_SPACING))


def survey_command(ports: list[int]) -> str:
    """The host command whose output `parse_survey` reads."""
    awk = f"awk -v cands={quote(' '.join(map(str, ports)))} {quote(_BUSY_AWK)}"
    return f"{_PORT_TABLES} | {awk}"


def parse_survey(text: str) -> PortSurvey:
    """The survey from `survey_command`'s output; lines it does not know are ignored."""
    busy: set[int] = set()
    ephemeral = (0, 0)
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "range" and words[1].isdigit() and words[2].isdigit():
            ephemeral = (int(words[1]), int(words[2]))
        elif len(words) == 2 and words[0] == "busy" and words[1].isdigit():
            busy.add(int(words[1]))
    return PortSurvey(frozenset(busy), ephemeral)


def spaced_from(ports: list[int], avoid: Collection[int]) -> list[int]:
    """Those of `ports` at least PORT_SPACING from every port in `avoid`."""
    return [p for p in ports if all(abs(p - q) >= PORT_SPACING for q in avoid)]


def pick_free(survey: PortSurvey, ports: list[int], count: int, avoid: Collection[int]) -> list[int]:
    """Up to `count` of `ports` free in the survey and PORT_SPACING from every port in `avoid`; those outside
    the ephemeral range first (an outgoing connection may take one inside it before the server binds it)."""
    low, high = survey.ephemeral
    free = [p for p in spaced_from(ports, avoid) if p not in survey.busy]
    outside = [p for p in free if not low <= p <= high]
    return (outside + [p for p in free if low <= p <= high])[:count]
