"""Noise that healthy servers print: lines that look alarming and say nothing about a failure.

An access-log line for a 404 or a startup 503, a health check that is retried, a slow-tokenizer or
deprecation notice. A benign line is never fatal and never evidence of a failure, whatever word it holds.
"""

from __future__ import annotations

import re

_BENIGN = re.compile(
    r"\"(?:GET|POST|HEAD|PUT|DELETE|OPTIONS) \S+ HTTP/[\d.]+\" (?:404|405|503)\b"
    r"|(?i:health ?check.{0,60}(?:retry|retrying|will retry|attempt \d+))"
    r"|(?i:slow tokenizer|fast tokenizer is not available|using a slow (?:image )?processor)"
    r"|(?i:\bdeprecat\w*)"
    r"|(?i:\bwill be removed in\b)"
)


def is_benign(message: str) -> bool:
    """Whether a message (prefix removed) is known harmless noise."""
    return _BENIGN.search(message) is not None
