"""Whether the server outlived an error: it became ready, or went on serving requests, after the line.

Only what a log shows counts. An error before the ready marker was survived (the warm-up passed after
it); an error while serving that names no fatal cause (a Python exception, an ERROR line: one request
failed) was survived when the log's last lines, after it, are batches run and requests answered. A
CUDA, NCCL or memory failure is never survived that way: the process cannot go on after it. Anything
else is taken as fatal: no line that names nothing is proof of health.
"""

from __future__ import annotations

from orchestrator.harvest.records import Evidence
from orchestrator.knowledge.markers import APP_STARTUP_MARKER, READY_MARKER, SERVING_ACTIVITY, UVICORN_MARKER


def ready_line_no(evidence: Evidence) -> int | None:
    """Where the server said it was ready (for vLLM, which has no warm-up: where uvicorn started, or, where the log
    lacks uvicorn's `Uvicorn running on` (a server started by its own runner, a log cut there), where the ASGI
    application's start-up completed, which uvicorn prints just before it)."""
    ready = evidence.marker(READY_MARKER)
    if ready is None and evidence.engine == "vllm":
        ready = evidence.marker(UVICORN_MARKER) or evidence.marker(APP_STARTUP_MARKER)
    return ready.line.line_no if ready else None


def last_activity_line_no(evidence: Evidence) -> int | None:
    """The number of the last line of the log's tail that shows requests being served, or None."""
    first = evidence.lines - len(evidence.tail) + 1
    found = [first + i for i, text in enumerate(evidence.tail) if SERVING_ACTIVITY.search(text)]
    return found[-1] if found else None


def survived(line_no: int, *, ready: int | None, activity: int | None, recoverable: bool) -> bool:
    """Whether the server went on after the line `line_no` (`ready` and `activity` as computed above);
    `recoverable`: the failure is one a server can outlive (one request's exception)."""
    if ready is not None and line_no < ready:
        return True
    return recoverable and activity is not None and line_no < activity
