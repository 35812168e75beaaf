"""A canned SGLang for the probe tests: one pure answer function, served two ways.

`Canned` answers like SGLang's endpoints (sglang-facts §2); `serve` puts it behind a real
loopback socket in a thread (STYLE practice 14: real servers in fixtures), and
`canned_transport` behind httpx.MockTransport. The client, ready and decode tests import it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from orchestrator.probe.client import ProbeClient

Answer = tuple[int, str, list[bytes]]
CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Write two sentences about the ocean."}]
CHAT_ARGS: dict[str, Any] = {"model": "m", "temperature": 0.7, "top_p": 0.95, "max_tokens": 32}


@dataclass
class Canned:
    """What the canned SGLang answers; tests change fields to inject behaviour."""

    greedy_text: str = " Paris. It is the largest city in France and its capital."
    chat_text: str = "The ocean covers most of the planet. Its tides rise and fall twice a day."
    model: str = "sim/glm-5"
    health: list[int] = field(default_factory=lambda: [200])
    """Successive `/health_generate` statuses; the last one repeats."""
    fail: dict[str, tuple[int, str]] = field(default_factory=dict)
    """path -> (status, body) for every request to that path."""
    fail_calls: dict[str, set[int]] = field(default_factory=dict)
    """path -> the 1-based request numbers answered with 500."""
    stream_error_after: int | None = None
    delay_s: dict[str, float] = field(default_factory=dict)
    legacy_info: bool = False
    """Answer only the deprecated `/get_server_info` and `/get_model_info`."""
    models_listed: bool = True
    calls: Counter[str] = field(default_factory=Counter)
    bodies: list[tuple[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    inflight: int = 0
    peak_inflight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, body: bytes, authorization: str | None) -> Answer:
        with self.lock:
            self.calls[path] += 1
            number = self.calls[path]
            self.bodies.append((path, json.loads(body) if body else None))
            self.auth.append(authorization)
            self.inflight += 1
            self.peak_inflight = max(self.peak_inflight, self.inflight)
        try:
            time.sleep(self.delay_s.get(path, 0.0))
            if path in self.fail:
                status, text = self.fail[path]
                return status, "application/json", [text.encode()]
            if number in self.fail_calls.get(path, ()):
                return 500, "application/json", [b'{"object":"error","message":"Internal server error"}']
            return self._route(method, path, json.loads(body) if body else {}, number)
        finally:
            with self.lock:
                self.inflight -= 1

    def _route(self, method: str, path: str, body: dict[str, Any], number: int) -> Answer:
        if path == "/health_generate":
            return self.health[min(number, len(self.health)) - 1], "text/plain", [b""]
        if path in ("/server_info", "/model_info") and self.legacy_info:
            return 404, "application/json", [b'{"detail":"Not Found"}']
        if path in ("/server_info", "/get_server_info"):
            return _json({"version": "0.5.9", "attention_backend": "flashinfer", "status": "ready"})
        if path in ("/model_info", "/get_model_info"):
            return _json({"model_path": self.model, "is_generation": True})
        if path == "/v1/models":
            data = [{"id": self.model, "object": "model", "owned_by": "sglang"}] if self.models_listed else []
            return _json({"object": "list", "data": data})
        if path == "/generate" and method == "POST":
            tokens = len(self.greedy_text.split())
            meta = {"finish_reason": {"type": "length", "length": tokens}, "completion_tokens": tokens}
            return _json({"text": self.greedy_text, "output_ids": list(range(tokens)), "meta_info": meta})
        if path == CHAT and method == "POST":
            return self._sse() if body.get("stream") else self._chat()
        return 404, "application/json", [b'{"detail":"Not Found"}']

    def _pieces(self) -> list[str]:
        words = self.chat_text.split(" ")
        return [words[0]] + [" " + w for w in words[1:]]

    def _chat(self) -> Answer:
        usage = {"prompt_tokens": 9, "completion_tokens": len(self._pieces()), "total_tokens": 9}
        choice = {"index": 0, "message": {"role": "assistant", "content": self.chat_text}, "finish_reason": "length"}
        return _json({"object": "chat.completion", "model": self.model, "choices": [choice], "usage": usage})

    def _sse(self) -> Answer:
        events: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        for number, piece in enumerate(self._pieces()):
            if number == self.stream_error_after:
                events.append({"error": {"message": "CUDA error: device-side assert triggered", "code": 500}})
                break
            events.append({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        else:
            events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            events.append({"choices": [], "usage": {"completion_tokens": len(self._pieces())}})
        chunks = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
        return 200, "text/event-stream", [*chunks, b"data: [DONE]\n\n"]


def _json(data: dict[str, Any]) -> Answer:
    return 200, "application/json", [json.dumps(data).encode()]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        canned: Canned = self.server.canned  # type: ignore[attr-defined]
        self.server.peers.add(self.client_address)  # type: ignore[attr-defined]
        status, content_type, chunks = canned.answer(method, self.path, body, self.headers.get("Authorization"))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if content_type == "text/event-stream":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = b"".join(chunks)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and left is expected in these tests


@contextmanager
def serve(canned: Canned) -> Iterator[tuple[str, set[Any]]]:
    """Serve `canned` on a loopback port in a thread; yields the base URL and the set of client peers."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.canned = canned  # type: ignore[attr-defined]
    server.peers = set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.peers  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def canned_transport(canned: Canned) -> httpx.MockTransport:
    """`canned` behind httpx.MockTransport."""

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode()
        status, content_type, chunks = canned.answer(
            request.method, path, request.read(), request.headers.get("Authorization")
        )
        return httpx.Response(status, headers={"Content-Type": content_type}, content=b"".join(chunks))

    return httpx.MockTransport(handler)


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_served_and_mocked_answers_agree() -> None:
    served, mocked = Canned(), Canned()
    with (
        serve(served) as (url, _),
        ProbeClient(url) as live,
        ProbeClient(url, transport=canned_transport(mocked)) as mock,
    ):
        for client in (live, mock):
            assert client.health_generate() == 200
            assert client.chat_stream(MESSAGES, **CHAT_ARGS).text == served.chat_text
            assert client.generate("x", {}).text == served.greedy_text
    assert served.calls == mocked.calls
