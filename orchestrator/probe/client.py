"""Seam 2: the one HTTP client that talks to an SGLang server.

httpx exceptions are translated here, and only here, into the errors of `probe/errors.py`, so
nothing above this module handles httpx errors. One `httpx.Client` lives as long as the
ProbeClient: building one costs ~20 ms, and keep-alive saves a TCP handshake per health poll.
It is thread-safe, so concurrent probes share it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import httpx

from orchestrator.errors import ProbeError
from orchestrator.probe.errors import (
    AUTH_STATUSES,
    BadAnswer,
    ConnectionDropped,
    CredentialsRefused,
    HttpStatusError,
    ProbeTimeout,
    ServerUnreachable,
)
from orchestrator.probe.wire import (
    ChatReply,
    ChatStream,
    GenerateReply,
    chat_reply,
    excerpt,
    generate_reply,
    iter_sse_data,
    json_object,
    model_ids,
)

Messages = list[dict[str, str]]


@contextmanager
def map_httpx_errors(where: str, timeout: float) -> Iterator[None]:
    """Re-raise httpx's exceptions as the most specific ProbeError, naming the request."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise ProbeTimeout(f"{where}: no complete answer within {timeout:g} s ({type(exc).__name__})") from exc
    except httpx.ConnectError as exc:
        raise ServerUnreachable(f"{where}: connection refused ({exc})") from exc
    except (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.RemoteProtocolError) as exc:
        raise ConnectionDropped(f"{where}: connection dropped before the answer was complete ({exc})") from exc
    except httpx.HTTPError as exc:
        raise ProbeError(f"{where}: {type(exc).__name__}: {exc}") from exc


def _check_status(response: httpx.Response, where: str) -> None:
    if response.status_code in AUTH_STATUSES:
        raise CredentialsRefused(where, response.status_code)
    if not response.is_success:
        body = response.read().decode("utf-8", "replace").strip()
        raise HttpStatusError(where, response.status_code, excerpt(body))


class ProbeClient:
    """HTTP client for one SGLang server: one reused connection pool, errors of our own only."""

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url
        self._timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # trust_env=False: an http_proxy from the environment answering requests meant for
        # 127.0.0.1 is a known real failure (sglang-facts §3.3), so proxies are never used.
        self._http = httpx.Client(
            base_url=base_url, transport=transport, headers=headers, timeout=timeout, trust_env=False
        )

    def __enter__(self) -> ProbeClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def health_generate(self, timeout: float = 1.0) -> int | None:
        """Status of `GET /health_generate` (200 = ready), or None when nothing answered in time."""
        try:
            with map_httpx_errors("GET /health_generate", timeout):
                return self._http.get("/health_generate", timeout=timeout).status_code
        except ProbeError:
            return None

    def server_info(self) -> dict[str, Any] | None:
        """`/server_info` (older servers: `/get_server_info`); None when neither answers (best effort)."""
        return self._first_json("/server_info", "/get_server_info")

    def model_info(self) -> dict[str, Any] | None:
        """`/model_info` (older servers: `/get_model_info`); None when neither answers (best effort)."""
        return self._first_json("/model_info", "/get_model_info")

    def models(self) -> list[str]:
        """The served model ids listed by `/v1/models`."""
        return model_ids(self._get_json("/v1/models"))

    def generate(self, text: str, sampling_params: dict[str, Any], timeout: float | None = None) -> GenerateReply:
        """One native `/generate` request, not streamed."""
        body = {"text": text, "sampling_params": sampling_params}
        return generate_reply(*self._post_json("/generate", body, timeout))

    def chat(
        self,
        messages: Messages,
        *,
        model: str,
        temperature: float,
        top_p: float,
        max_tokens: int,
        timeout: float | None = None,
    ) -> ChatReply:
        """One `/v1/chat/completions` request, not streamed."""
        body = _chat_body(messages, model, temperature, top_p, max_tokens, stream=False)
        return chat_reply(*self._post_json("/v1/chat/completions", body, timeout))

    def chat_stream(
        self,
        messages: Messages,
        *,
        model: str,
        temperature: float,
        top_p: float,
        max_tokens: int,
        timeout: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatReply:
        """One streamed `/v1/chat/completions` request, read to `data: [DONE]` and assembled.

        `extra` adds SGLang's own request keys (`ignore_eos`) to the OpenAI body.
        """
        limit = self._timeout if timeout is None else timeout
        where = "POST /v1/chat/completions (stream)"
        body = {**_chat_body(messages, model, temperature, top_p, max_tokens, stream=True), **(extra or {})}
        stream = ChatStream(where)
        started = time.perf_counter()
        with (
            map_httpx_errors(where, limit),
            self._http.stream("POST", "/v1/chat/completions", json=body, timeout=limit) as response,
        ):
            _check_status(response, where)
            for data in iter_sse_data(response.iter_lines()):
                if data == "[DONE]":
                    return stream.reply(time.perf_counter() - started)
                stream.add(json_object(data, where), time.perf_counter() - started)
                # httpx's timeout bounds each read; this bounds the whole stream.
                if time.perf_counter() - started > limit:
                    raise ProbeTimeout(f"{where}: stream still running after {limit:g} s")
        raise BadAnswer(f"{where}: the stream ended without data: [DONE] after {stream.chunks} chunks")

    def _get_json(self, path: str) -> dict[str, Any]:
        where = f"GET {path}"
        with map_httpx_errors(where, self._timeout):
            response = self._http.get(path)
            _check_status(response, where)
        return json_object(response.text, where)

    def _first_json(self, *paths: str) -> dict[str, Any] | None:
        for path in paths:
            try:
                return self._get_json(path)
            except HttpStatusError:
                continue  # an older or newer server: try the other name
            except ProbeError:
                return None
        return None

    def _post_json(self, path: str, body: dict[str, Any], timeout: float | None) -> tuple[dict[str, Any], float]:
        limit = self._timeout if timeout is None else timeout
        where = f"POST {path}"
        started = time.perf_counter()
        with map_httpx_errors(where, limit):
            response = self._http.post(path, json=body, timeout=limit)
            _check_status(response, where)
        latency = time.perf_counter() - started
        return json_object(response.text, where), latency


def _chat_body(
    messages: Messages, model: str, temperature: float, top_p: float, max_tokens: int, *, stream: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body
