"""The literals of every line worth harvesting: markers, signatures, facts, errors, warnings.

A line holding none of them is skipped without being parsed (prefilter.py); on the host, one `grep -E`
of HOST_GREP_REGEX finds the same lines in a huge log.
"""

from __future__ import annotations

import re

from orchestrator.harvest import autos
from orchestrator.knowledge import fatal, signatures
from orchestrator.knowledge.markers import MARKERS

GENERIC_NEEDLES: tuple[str, ...] = (
    "Traceback", 'File "', '", line ', "Error", "ERROR", "error", "Exception", "exception", "Fatal", "FATAL", "fatal",
    "CRITICAL", "Critical", "Failed", "FAILED", "fail", "Killed", "SIG", "signal", "Assertion", "Aborted",
    "Segmentation fault", "timeout", "timed out", "Timed out", "WARN", "Warning", "warn", "Deprecat", "DEPRECAT",
    "deprecat", "might cause", "fall", "Falling back", "Ignor", "Setting ", "Please ", "DeepGemm", "DeepGEMM",
    "version", "vLLM", "Avg prompt throughput", "NaN",
)
"""Literals of lines worth a look besides markers and signatures: errors, warnings, tracebacks, engine hints."""

NEEDLES: tuple[str, ...] = tuple(
    dict.fromkeys(
        (*GENERIC_NEEDLES, *(m.needle for m in MARKERS), *signatures.NEEDLES, *autos.NEEDLES, *fatal.NEEDLES)
    )
)
"""Every literal the harvest cares about: a line with none of them is skipped without being parsed."""

_ERE_SPECIAL = re.compile(r"([.\\[\](){}*+?|^$])")
HOST_GREP_REGEX: str = "|".join(_ERE_SPECIAL.sub(r"\\\1", n) for n in sorted(NEEDLES))
"""One POSIX extended regex (`grep -E -n -b`) matching every line worth harvesting from a huge log."""
