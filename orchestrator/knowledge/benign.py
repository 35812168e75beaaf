"""Noise that healthy servers print: lines that look alarming and say nothing about a failure.

An access-log line for a 404 or a startup 503, a health check that is retried, a slow-tokenizer or
deprecation notice, an HTTP client's report that the server refused its request with a 4xx (httpx's `Client error
'422 Unprocessable Entity' for url`, requests' `400 Client Error: ... for url`: the server answered; not the model
hub refusing a download), `NoneType: None`, what a logger's `exception()` prints where no exception is being
handled (its message, on the line before, is the statement), and a failure the message itself says the process goes on
without (SGLang's `Failed to load generation config for <model>: ... Proceeding without generation config.`;
transformers' `Some weights of <class> were not initialized from the model checkpoint at <path> and are newly
initialized: [...]`, its warning that loading went on with those weights fresh). A benign
line is never fatal and never evidence of a failure, whatever word it holds.
"""

from __future__ import annotations

import re

_BENIGN = re.compile(
    r"\"(?:GET|POST|HEAD|PUT|DELETE|OPTIONS) \S+ HTTP/[\d.]+\" (?:404|405|503)\b"
    r"|(?i:health ?check.{0,60}(?:retry|retrying|will retry|attempt \d+))"
    r"|(?i:slow tokenizer|fast tokenizer is not available|using a slow (?:image )?processor)"
    r"|(?i:\bdeprecat\w*)"
    r"|(?i:\bwill be removed in\b)"
    r"|Client error '4\d\d [^']*' for url|\b4\d\d Client Error: .{0,80} for url"
    r"(?!: https?://(?:huggingface\.co|hf\.co|[\w.\-]*modelscope\.\w+)/)"
    r"|^NoneType: None$"
    r"|(?i:[.;,]\s*(?:proceeding|continuing|going on) without (?:the |a |an |any )?[\w -]{1,40}\.?\s*$)"
    r"|\bwere not initialized from the model checkpoint\b.{0,300}\band are newly initialized\b"
)


def is_benign(message: str) -> bool:
    """Whether a message (prefix removed) is known harmless noise."""
    return _BENIGN.search(message) is not None
