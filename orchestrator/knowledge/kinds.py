"""What kind of message a line is: a warning, a deprecation, an error, a CUDA error.

SGLang's own log format carries no level (`[ts TP0] message`), and its warnings are logger.warning calls
that look like any other line. So a level-less line counts as a warning by its wording (`might cause`,
`deprecated`, `falling back`, `will be ignored`, ...); lines with a level word (vLLM, uvicorn, Python
logging, `[ts] WARNING file.py:12:`) are taken at their word.
"""

from __future__ import annotations

import re

from orchestrator.knowledge.lines import EXCEPTION_START_RE, Parsed

ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})

_WARNING_CLASS = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*Warning\b|\b[A-Z]\w*Warning: |\bWARN(?:ING)?\b|^Warning\b")
_WARNING_WORDING = re.compile(
    r"(?i)\bdeprecat|\bmight (?:cause|lead|result|not)\b|\bmay (?:cause|lead to|result in)\b|\bnot recommended\b"
    r"|\bdegrad|\bfall(?:ing)? ?back\b|\bfallback\b|\bignor(?:e|ed|ing)\b"
    r"|\bwill be (?:ignored|disabled|removed|overridden)\b|\byou should\b|\bexperimental\b|\boverrid(?:e|es|ing)\b"
    r"|\bsetting \S+(?: \S+){0,2} to\b|\bautomatically (?:selected|set|enabled|disabled)\b"
    r"|\bplease (?:use|set|consider|install|upgrade|increase|reduce)\b|\b(?:will|may|might|could) result in\b"
)
_DEPRECATION = re.compile(r"(?i)deprecat")
_CUDA_ERROR = re.compile(
    r"CUDA (?:error|Error|driver error)|cudaError\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|CUDA_ERROR_\w+"
    r"|device-side assert|Assertion .+ failed|illegal memory access|CUDA out of memory|no kernel image"
)
_DIGITS = re.compile(r"\d+")
_QUOTES_ANOTHER = re.compile(
    r"^(?:[\w.]+\.)?\w*(?:EngineDead|ActorDied|RayTask|WorkerCrashed|ActorUnavailable)\w*(?:Error|Exception)\b"
    r"(?=.*?(?:\b[A-Z]\w*(?:Error|Exception)\b|(?i:original error|creation task|stack ?trace)))"
    r"|(?i:inspect the stack ?trace to find the original error|(?:see|check) the stack ?trace above"
    r"|see root cause above)"
    r"|\bCUDA warning: .{1,200}\(function \w+\)\s*$"
)
"""A message that reports a failure elsewhere by quoting it (`EngineDeadError: Engine loop is not running ...:
OutOfMemoryError(...)`, `Worker failed with error '...', please check the stack trace above`): the quoted failure is
stated first-hand on another line. A wrapper that carries no other failure (`ActorDiedError: The actor died
unexpectedly before finishing this task.`) quotes nothing: it is itself the statement. PyTorch's `CUDA warning: <the
error> (function destroyEvent)` is the sticky error met again while cleaning up: the error is raised elsewhere."""


_ADVICE = re.compile(r"(?i)(?:please|you (?:should|can|may|need to|must)|try|consider|to fix)\b")
"""A line that opens with advice (`Please install or update ...`, `You can try ...`)."""


def is_advice(message: str) -> bool:
    """Whether a message opens with advice: going on an exception's message, it is the error's, not a warning."""
    return _ADVICE.match(message) is not None


def is_warning(p: Parsed, message: str, *, continuing: bool = False) -> bool:
    """Whether a message (prefix removed, stripped) is a warning. `continuing`: the line goes on an exception's message
    (the lines after a traceback's exception line), whose advice (`Please install ...`) is the error's, not a warning's
    wording."""
    if p.level == "WARNING":
        return True
    if p.level in ERROR_LEVELS:
        return False
    if _WARNING_CLASS.search(message):
        return not EXCEPTION_START_RE.match(message) or "Warning" in message.split(":", 1)[0]
    if EXCEPTION_START_RE.match(message):
        return False
    return p.level is None and not (continuing and is_advice(message)) and _WARNING_WORDING.search(message) is not None


def is_deprecation(message: str) -> bool:
    """Whether a message announces something deprecated."""
    return _DEPRECATION.search(message) is not None


def is_error(p: Parsed, message: str) -> bool:
    """Whether a message is an error by its level or because it starts with a Python exception."""
    return p.level in ERROR_LEVELS or EXCEPTION_START_RE.match(message) is not None


def cuda_error_key(message: str) -> str | None:
    """A key under which repeats of a CUDA error collapse (thread/block numbers masked), or None."""
    if _CUDA_ERROR.search(message) is None:
        return None
    return _DIGITS.sub("#", message)


_GUESSES = re.compile(r"(?i)\b(?:potential|possible|common|likely) (?:root )?causes?\b")
"""A message that lists what may have happened (Ray's `There are some potential root causes. (1) The process is
killed by SIGKILL by OOM killer ... (2) ray stop --force is called`): what it names is a guess, not a statement."""


_HEDGED = re.compile(r"(?i)\b(?:likely|probably|possibly|perhaps|presumably|(?:might|may|could)(?: not)? be)\b")
"""A statement that hedges what it reports (c10d's `poll for socket returned 0, likely a timeout`): another line that
states the same failure outright (`timed out after 1800000ms`) says more; so does one that doubts it matters (an
allocator's `cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue ... will free cache and retry)`)."""


def hedges(message: str) -> bool:
    """Whether a message (prefix removed) hedges the failure it reports."""
    return _HEDGED.search(message) is not None


def states_not_guesses(message: str) -> bool:
    """Whether a message (prefix removed) states what happened rather than listing possible causes."""
    return _GUESSES.search(message) is None


def quotes_another(message: str) -> bool:
    """Whether a message (prefix removed) reports another process's failure by quoting it."""
    return _QUOTES_ANOTHER.search(message) is not None
