"""The probe client against a real tiny HTTP server, and against MockTransport for faults."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from orchestrator.probe.client import ProbeClient
from orchestrator.probe.errors import (
    BadAnswer,
    ConnectionDropped,
    HttpStatusError,
    ProbeTimeout,
    ServerUnreachable,
)
from orchestrator.probe.wire import excerpt, iter_sse_data
from tests.probe.test_canned import CHAT, CHAT_ARGS, MESSAGES, Canned, free_port, serve


@pytest.fixture
def canned() -> Canned:
    return Canned()


@pytest.fixture
def live(canned: Canned) -> Iterator[tuple[ProbeClient, set[Any]]]:
    with serve(canned) as (url, peers), ProbeClient(url, timeout=5.0) as client:
        yield client, peers


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> ProbeClient:
    return ProbeClient("http://127.0.0.1:30000", transport=httpx.MockTransport(handler), timeout=5.0)


# --- against the real loopback server -------------------------------------------------------


def test_generate_reads_text_tokens_and_finish_reason(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    reply = client.generate("The capital city of France is", {"temperature": 0, "max_new_tokens": 16}, timeout=5)
    assert reply.text == canned.greedy_text
    assert reply.completion_tokens == len(canned.greedy_text.split())
    assert reply.finish_reason == "length"
    assert reply.latency_s > 0
    assert canned.bodies[-1] == (
        "/generate",
        {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 16}},
    )


def test_chat_not_streamed(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    reply = client.chat(MESSAGES, **CHAT_ARGS, timeout=5)
    assert (reply.text, reply.finish_reason, reply.chunks) == (canned.chat_text, "length", 0)
    assert reply.completion_tokens == len(canned.chat_text.split())
    sent = canned.bodies[-1][1]
    assert sent["temperature"] == 0.7 and sent["top_p"] == 0.95 and sent["stream"] is False


def test_chat_stream_assembles_deltas(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    reply = client.chat_stream(MESSAGES, **CHAT_ARGS, timeout=5)
    assert reply.text == canned.chat_text
    assert reply.chunks == len(canned.chat_text.split()) == reply.completion_tokens
    assert reply.finish_reason == "stop"
    assert reply.first_chunk_s is not None and reply.first_chunk_s <= reply.latency_s
    assert canned.bodies[-1][1]["stream_options"] == {"include_usage": True}


def test_error_event_mid_stream_is_a_failure(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    canned.stream_error_after = 3
    with pytest.raises(BadAnswer, match=r"error event after 3 chunks.*device-side assert"):
        client.chat_stream(MESSAGES, **CHAT_ARGS, timeout=5)


def test_info_endpoints(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    assert client.models() == [canned.model]
    assert (client.server_info() or {})["version"] == "0.5.9"
    assert (client.model_info() or {})["model_path"] == canned.model
    canned.legacy_info = True
    assert (client.server_info() or {})["version"] == "0.5.9"
    assert (client.model_info() or {})["is_generation"] is True
    assert canned.calls["/get_server_info"] == 1 and canned.calls["/get_model_info"] == 1


def test_health_generate_reports_each_status(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    canned.health = [503, 503, 200]
    assert [client.health_generate(timeout=1.0) for _ in range(4)] == [503, 503, 200, 200]


def test_one_connection_is_reused(live: tuple[ProbeClient, set[Any]]) -> None:
    client, peers = live
    for _ in range(5):
        client.health_generate()
        client.generate("x", {"temperature": 0}, timeout=5)
    assert len(peers) == 1


def test_http_500_keeps_status_and_body(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    canned.fail[CHAT] = (500, '{"object":"error","message":"CUDA error: device-side assert triggered"}')
    with pytest.raises(HttpStatusError, match=r"HTTP 500.*device-side assert") as caught:
        client.chat(MESSAGES, **CHAT_ARGS, timeout=5)
    assert caught.value.status == 500
    with pytest.raises(HttpStatusError, match="HTTP 500"):
        client.chat_stream(MESSAGES, **CHAT_ARGS, timeout=5)


def test_slow_answer_times_out(live: tuple[ProbeClient, set[Any]], canned: Canned) -> None:
    client, _ = live
    canned.delay_s["/generate"] = 0.5
    with pytest.raises(ProbeTimeout, match=r"within 0\.1 s"):
        client.generate("x", {}, timeout=0.1)
    canned.delay_s["/health_generate"] = 0.5
    assert client.health_generate(timeout=0.1) is None


def test_api_key_is_sent_as_bearer(canned: Canned) -> None:
    with serve(canned) as (url, _), ProbeClient(url, api_key="sk-test") as client:
        client.health_generate()
    assert canned.auth == ["Bearer sk-test"]


def test_proxy_environment_is_ignored(canned: Canned, monkeypatch: pytest.MonkeyPatch) -> None:
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with serve(canned) as (url, _):
        with pytest.raises(httpx.ConnectError), httpx.Client(trust_env=True) as naive:
            naive.get(f"{url}/health_generate")  # what a client that honours the proxy would do
        with ProbeClient(url) as client:
            assert client.health_generate() == 200


def test_connection_refused() -> None:
    with ProbeClient(f"http://127.0.0.1:{free_port()}") as client:
        assert client.health_generate() is None
        assert client.server_info() is None
        with pytest.raises(ServerUnreachable, match="POST /generate: connection refused"):
            client.generate("x", {}, timeout=1)
        with pytest.raises(ServerUnreachable):
            client.models()


# --- faults through MockTransport -------------------------------------------------------------


class _ResetAfterFirstEvent(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield b'data: {"choices":[{"index":0,"delta":{"content":"The"}}]}\n\n'
        raise httpx.ReadError("[Errno 104] Connection reset by peer")


def test_reset_mid_stream_is_a_dropped_connection() -> None:
    client = mock_client(lambda request: httpx.Response(200, stream=_ResetAfterFirstEvent()))
    with pytest.raises(ConnectionDropped, match="Connection reset by peer"):
        client.chat_stream(MESSAGES, **CHAT_ARGS)


def test_stream_without_done_is_a_bad_answer() -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"The"}}]}\n\n'
    client = mock_client(lambda request: httpx.Response(200, content=body))
    with pytest.raises(BadAnswer, match=r"without data: \[DONE\] after 1 chunks"):
        client.chat_stream(MESSAGES, **CHAT_ARGS)


class _Drip(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        while True:
            time.sleep(0.02)
            yield b'data: {"choices":[{"index":0,"delta":{"content":" ok"}}]}\n\n'


def test_stream_is_bounded_as_a_whole() -> None:
    client = mock_client(lambda request: httpx.Response(200, stream=_Drip()))
    started = time.perf_counter()
    with pytest.raises(ProbeTimeout, match=r"still running after 0\.1 s"):
        client.chat_stream(MESSAGES, **CHAT_ARGS, timeout=0.1)
    assert time.perf_counter() - started < 1.0


def test_503_then_200() -> None:
    statuses = iter([503, 200])
    client = mock_client(lambda request: httpx.Response(next(statuses)))
    assert [client.health_generate(), client.health_generate()] == [503, 200]


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx.ReadTimeout("timed out"), ProbeTimeout),
        (httpx.ConnectTimeout("timed out"), ProbeTimeout),
        (httpx.ConnectError("[Errno 111] Connection refused"), ServerUnreachable),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), ConnectionDropped),
        (httpx.WriteError("broken pipe"), ConnectionDropped),
    ],
)
def test_httpx_errors_are_translated(exc: httpx.HTTPError, expected: type[Exception]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    client = mock_client(handler)
    with pytest.raises(expected) as caught:
        client.generate("x", {}, timeout=1)
    assert caught.value.__cause__ is exc
    assert client.health_generate() is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"<html>proxy error</html>", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"meta_info": {}}', "no text"),
    ],
)
def test_malformed_generate_answer(content: bytes, message: str) -> None:
    client = mock_client(lambda request: httpx.Response(200, content=content))
    with pytest.raises(BadAnswer, match=message):
        client.generate("x", {})


def test_malformed_chat_answer() -> None:
    client = mock_client(lambda request: httpx.Response(200, json={"choices": []}))
    with pytest.raises(BadAnswer, match=r"no choices\[0\]\.message"):
        client.chat(MESSAGES, **CHAT_ARGS)


# --- pure parsing -----------------------------------------------------------------------------


def test_iter_sse_data_follows_the_event_stream_format() -> None:
    lines = [": keep-alive", "event: message", 'data: {"a":', "data: 1}", "", "", "data:[DONE]"]
    assert list(iter_sse_data(lines)) == ['{"a":\n1}', "[DONE]"]


def test_excerpt_is_bounded() -> None:
    assert excerpt("short") == "short"
    cut = excerpt("x" * 500)
    assert len(cut) == 200 and cut.endswith("…")
