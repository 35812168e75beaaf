"""SGLang's HTTP answers read into our reply objects: pure functions over text and parsed JSON.

`/generate` is SGLang's native format (`meta_info.completion_tokens`, `finish_reason` as
`{"type": ...}`); chat is the OpenAI format, streamed as `data: {...}` events that end with
`data: [DONE]` (sglang-facts §2.3).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from orchestrator.probe.errors import BadAnswer

EXCERPT_CHARS = 200


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` cut to at most `limit` characters, ending in an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class GenerateReply:
    """The answer of SGLang's native `/generate`."""

    text: str
    completion_tokens: int | None
    latency_s: float
    finish_reason: str | None
    raw: dict[str, Any]


@dataclass(frozen=True)
class ChatReply:
    """The answer of `/v1/chat/completions`, streamed or not."""

    text: str
    completion_tokens: int | None
    latency_s: float
    finish_reason: str | None
    raw: dict[str, Any]
    """Non-streamed: the whole JSON answer; streamed: the last event."""
    chunks: int = 0
    """Streamed events that carried content (0 when not streamed)."""
    first_chunk_s: float | None = None
    chunk_times: tuple[float, ...] = ()
    """Streamed: seconds after the request was sent that each content event arrived (TTFT, inter-token gaps)."""


def iter_sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The `data` of each server-sent event; several `data:` lines of one event are joined by newlines."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[len("data:") :]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def json_object(text: str, where: str) -> dict[str, Any]:
    """`text` parsed as a JSON object, or BadAnswer."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadAnswer(f"{where}: not JSON: {excerpt(text, 80)!r}") from exc
    if not isinstance(data, dict):
        raise BadAnswer(f"{where}: expected a JSON object, got {excerpt(text, 80)!r}")
    return data


def generate_reply(data: dict[str, Any], latency_s: float) -> GenerateReply:
    """A `/generate` answer read into a GenerateReply."""
    text = data.get("text")
    if not isinstance(text, str):
        raise BadAnswer(f"POST /generate: no text in {_brief(data)}")
    meta = _object_at(data, "meta_info")
    return GenerateReply(
        text, _int_or_none(meta.get("completion_tokens")), latency_s, _finish_type(meta.get("finish_reason")), data
    )


def chat_reply(data: dict[str, Any], latency_s: float) -> ChatReply:
    """A non-streamed chat completion read into a ChatReply."""
    try:
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise BadAnswer(f"POST /v1/chat/completions: no choices[0].message in {_brief(data)}") from exc
    tokens = _int_or_none(_object_at(data, "usage").get("completion_tokens"))
    text = content if isinstance(content, str) else ""
    return ChatReply(text, tokens, latency_s, _finish_type(choice.get("finish_reason")), data)


def model_ids(data: dict[str, Any]) -> list[str]:
    """The model ids of a `/v1/models` answer."""
    entries = data.get("data")
    if not isinstance(entries, list):
        raise BadAnswer(f"GET /v1/models: no data list in {_brief(data)}")
    return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]


class ChatStream:
    """The events of a streamed chat completion put back together; an error event is a failure."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.parts: list[str] = []
        self.chunks = 0
        self.usage_tokens: int | None = None
        self.finish_reason: str | None = None
        self.first_chunk_s: float | None = None
        self.chunk_times: list[float] = []
        self.last: dict[str, Any] = {}

    def add(self, event: dict[str, Any], elapsed_s: float) -> None:
        """Take one parsed `data:` event, received `elapsed_s` after the request was sent."""
        if "error" in event or event.get("object") == "error":
            raise BadAnswer(f"{self.where}: error event after {self.chunks} chunks: {_brief(event)}")
        self.last = event
        usage = _object_at(event, "usage")
        if "completion_tokens" in usage:
            self.usage_tokens = _int_or_none(usage["completion_tokens"])
        choices = event.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            content = _object_at(choice, "delta").get("content")
            if isinstance(content, str) and content:
                self.parts.append(content)
                self.chunks += 1
                self.chunk_times.append(elapsed_s)
                if self.first_chunk_s is None:
                    self.first_chunk_s = elapsed_s
            self.finish_reason = _finish_type(choice.get("finish_reason")) or self.finish_reason

    def reply(self, latency_s: float) -> ChatReply:
        """The assembled answer."""
        # Without a usage event, count one token per content chunk: SGLang streams token by token.
        tokens = self.usage_tokens if self.usage_tokens is not None else self.chunks
        text = "".join(self.parts)
        return ChatReply(
            text, tokens, latency_s, self.finish_reason, self.last, self.chunks, self.first_chunk_s,
            tuple(self.chunk_times),
        )  # fmt: skip


def _brief(data: dict[str, Any]) -> str:
    return excerpt(json.dumps(data), 120)


def _object_at(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finish_type(value: Any) -> str | None:
    # /generate reports {"type": "length", "length": N}; the OpenAI API reports a plain string.
    if isinstance(value, dict):
        value = value.get("type")
    return value if isinstance(value, str) else None
