"""Whether the server outlived an error: it became ready, or went on serving requests, after the line.

Only what a log shows counts. An error before the ready marker was survived (the warm-up passed after
it); an error while serving that names no fatal cause (a Python exception, an ERROR line: one request
failed) was survived when the log's last lines, after it, are batches run and requests answered. A
CUDA, NCCL or memory failure is never survived that way: the process cannot go on after it. Anything
else is taken as fatal: no line that names nothing is proof of health.

Once the server was ready, a stop asked from outside (a signal it received, a job cancelled, Ctrl-C: the signature
rows marked `stop`, and a KeyboardInterrupt or SystemExit traceback) ends the run: what is logged from there on (an
engine declared dead because it was told to stop, a child that exited on the signal, a cancel that killed the rest)
is shutdown noise, not a cause. A failure stated before the stop is still one, and a stop before the server was ready
is no end of a run: the start-up was killed.

A server that tears itself down after a failure (SGLang's kill_process_tree SIGKILLs its own process) exits -9 as
if killed: a kill stated only by that signal or status after the teardown began is the teardown's, no cause.
"""

from __future__ import annotations

from orchestrator.classify.structure import OPERATOR_STOP, exception_type
from orchestrator.harvest.records import Evidence
from orchestrator.knowledge.markers import (
    API_SERVER_MARKER,
    APP_STARTUP_MARKER,
    ENGINE_READY_MARKER,
    READY_MARKER,
    SERVING_ACTIVITY,
    UVICORN_MARKER,
)
from orchestrator.knowledge.signatures import BY_ID


def ready_line_no(evidence: Evidence) -> int | None:
    """Where the server said it was ready (for vLLM, which has no warm-up: where uvicorn started, or, where the log
    lacks uvicorn's `Uvicorn running on` (a server started by its own runner, a log cut there), where the ASGI
    application's start-up completed, which uvicorn prints just before it; else where the API server started, which
    vLLM logs once its engine is up (uvicorn's own lines may go to another stream); else, for the offline engine that
    has no HTTP server (`LLM(...)`), where the engine's start-up ended: `init engine (profile, create kv cache, warmup
    model) took`, after the KV cache, compilation and graph capture)."""
    ready = evidence.marker(READY_MARKER)
    if ready is None and evidence.engine == "vllm":
        ready = (evidence.marker(UVICORN_MARKER) or evidence.marker(APP_STARTUP_MARKER)
                 or evidence.marker(API_SERVER_MARKER) or evidence.marker(ENGINE_READY_MARKER))
    return ready.line.line_no if ready else None


def last_activity_line_no(evidence: Evidence) -> int | None:
    """The number of the last line of the log's tail that shows requests being served, or None."""
    first = evidence.lines - len(evidence.tail) + 1
    found = [first + i for i, text in enumerate(evidence.tail) if SERVING_ACTIVITY.search(text)]
    return found[-1] if found else None


def stop_line_no(evidence: Evidence, ready: int | None) -> int | None:
    """The first line after the ready one (`ready`, as computed above) where a stop asked from outside began."""
    if ready is None:
        return None
    stops = [h.line.line_no for h in evidence.hits
             if h.line.line_no > ready and h.signature in BY_ID and BY_ID[h.signature].stop]
    for tb in evidence.tracebacks:
        line, etype = tb.exception_line, exception_type(tb.exception)
        if line is not None and line.line_no > ready and etype is not None and OPERATOR_STOP.search(etype):
            stops.append(line.line_no)
    return min(stops, default=None)


def teardown_line_no(evidence: Evidence) -> int | None:
    """The first line where the server began to kill its own processes after one failed (the signature rows marked
    `teardown`: SGLang's kill_process_tree and SIGQUIT handler), or None."""
    return min((h.line.line_no for h in evidence.hits if h.signature in BY_ID and BY_ID[h.signature].teardown),
               default=None)


def survived(line_no: int, *, ready: int | None, activity: int | None, recoverable: bool,
             stop: int | None = None) -> bool:
    """Whether the server went on after the line `line_no` (`ready`, `activity` and `stop` as computed above), or
    the line is shutdown noise after a stop asked for; `recoverable`: the failure is one a server can outlive (one
    request's exception)."""
    if ready is not None and line_no < ready:
        return True
    if stop is not None and line_no >= stop:
        return True
    return recoverable and activity is not None and line_no < activity
