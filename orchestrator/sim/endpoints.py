"""SGLang's HTTP API over the simulator's HTTP/1.1 server (http11.py): health, info, native /generate and
OpenAI-style endpoints.

HTTP/1.1 with keep-alive; streaming answers are server-sent events in chunked encoding ending with
`data: [DONE]`, as SGLang's StreamingResponse sends them. Each request is logged as uvicorn's access log.
"""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from orchestrator.sim.answers import EOS_TOKEN, Answer, count_tokens, split_tokens
from orchestrator.sim.engine import Engine, GenRequest
from orchestrator.sim.http11 import RequestHandler
from orchestrator.sim.logfmt import LogWriter

DEFAULT_CHAT_MAX_TOKENS = 512


class BadRequest(Exception):
    """The request body is not what the endpoint takes (answered 400)."""


@dataclass
class Api:
    """What the handlers serve from."""

    engine: Engine
    log: LogWriter
    model_name: str
    model_info: dict[str, Any]
    server_info: Callable[[], dict[str, Any]]
    max_model_len: int
    api_key: str | None = None
    """`--api-key`: every path but /health* and /metrics then demands `Authorization: Bearer <key>`."""


def make_handler(api: Api) -> type[RequestHandler]:
    """A request handler class bound to `api`."""

    class Handler(_Handler):
        pass

    Handler.api = api
    return Handler


class _Handler(RequestHandler):
    api: Api

    def _authorized(self, path: str) -> bool:
        """SGLang's api-key middleware: /health* and /metrics are open, the rest needs the bearer key (else 401)."""
        key = self.api.api_key
        if not key or path.startswith(("/health", "/metrics")) or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._json({"error": "Unauthorized"}, HTTPStatus.UNAUTHORIZED)
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self._authorized(path):
            return
        if path in ("/health", "/health_generate"):
            self._empty(HTTPStatus.OK if self.api.engine.healthy() else HTTPStatus.SERVICE_UNAVAILABLE)
        elif path in ("/model_info", "/get_model_info"):
            self._deprecated(path, "/model_info")
            self._json(self.api.model_info)
        elif path in ("/server_info", "/get_server_info"):
            self._deprecated(path, "/server_info")
            self._json(self.api.server_info())
        elif path == "/v1/models":
            card = {
                "id": self.api.model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "sglang",
                "root": self.api.model_name,
                "max_model_len": self.api.max_model_len,
            }
            self._json({"object": "list", "data": [card]})
        else:
            self._json({"detail": "Not Found"}, HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        routes = {"/generate": self._generate, "/v1/chat/completions": self._chat, "/v1/completions": self._complete}
        route = routes.get(path)
        try:
            body = self._body()
            if not self._authorized(path):
                return
            if route is None:
                self._json({"detail": "Not Found"}, HTTPStatus.NOT_FOUND)
            else:
                route(body)
        except BadRequest as exc:
            error = {"object": "error", "message": str(exc), "type": "BadRequestError", "param": None, "code": 400}
            self._json(error, HTTPStatus.BAD_REQUEST)

    def _generate(self, body: dict[str, Any]) -> None:
        texts = body.get("text")
        if texts is None and body.get("input_ids") is not None:
            texts = f"<{len(body['input_ids'])} input ids>"
        if not isinstance(texts, (str, list)):
            raise BadRequest("Either text or input_ids should be provided.")
        params = body.get("sampling_params") or {}
        prompts = texts if isinstance(texts, list) else [texts]
        requests = [_request(str(t), params, "max_new_tokens", 128) for t in prompts]
        if body.get("stream") and isinstance(texts, str):
            rid = _request_id()
            text = ""

            def event(piece: str) -> str:
                nonlocal text
                text += piece
                return json.dumps({"text": text, "meta_info": {"id": rid, "finish_reason": None}})

            answer = self._stream(requests[0], event)
            self._event(json.dumps({"text": answer.text, "meta_info": _meta(rid, requests[0], answer)}))
            self._end_stream()
            return
        # A batch is decoded together, as the scheduler would run it: its requests are in flight at once.
        results = _in_parallel(self._one, requests)
        self._json(results if isinstance(texts, list) else results[0])

    def _one(self, request: GenRequest) -> dict[str, Any]:
        started = time.monotonic()
        answer = self.api.engine.generate(request)
        ids = [1000 + zlib.crc32(p.encode()) % 50000 for p in split_tokens(answer.text)]
        meta = {**_meta(_request_id(), request, answer), "e2e_latency": time.monotonic() - started}
        return {"text": answer.text, "output_ids": ids, "meta_info": meta}

    def _chat(self, body: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: field required")
        prompt = _last_user_text(messages)
        self._openai(body, prompt, "chat.completion")

    def _complete(self, body: dict[str, Any]) -> None:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest("prompt: a string is required")
        self._openai(body, prompt, "text_completion")

    def _openai(self, body: dict[str, Any], prompt: str, kind: str) -> None:
        tokens_key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        request = _request(prompt, body, tokens_key, DEFAULT_CHAT_MAX_TOKENS)
        rid, created, model = _request_id(), int(time.time()), str(body.get("model") or self.api.model_name)
        chat = kind == "chat.completion"
        if body.get("stream"):
            base = {"id": rid, "object": f"{kind}.chunk" if chat else kind, "created": created, "model": model}

            def chunk(piece: str | None, finish: str | None = None, role: bool = False) -> str:
                choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
                if chat and role:
                    choice["delta"] = {"role": "assistant", "content": ""}
                elif chat:
                    choice["delta"] = {"content": piece} if piece else {}
                else:
                    choice["text"] = piece or ""
                return json.dumps({**base, "choices": [choice]})

            answer = self._stream(request, chunk, first=chunk(None, role=True) if chat else None)
            self._event(chunk(None, answer.finish))
            options = body.get("stream_options")
            if isinstance(options, dict) and options.get("include_usage"):
                # SGLang's last event before [DONE] when asked: no choices, the request's usage.
                self._event(json.dumps({**base, "choices": [], "usage": _usage(prompt, answer)}))
            self._end_stream()
            return
        answer = self.api.engine.generate(request)
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text, "reasoning_content": None, "tool_calls": None},
            }
        else:
            choice = {"index": 0, "text": answer.text}
        choice.update(
            {
                "logprobs": None,
                "finish_reason": answer.finish,
                "matched_stop": EOS_TOKEN if answer.finish == "stop" else None,
            }
        )
        usage = _usage(prompt, answer)
        self._json({"id": rid, "object": kind, "created": created, "model": model, "choices": [choice], "usage": usage})

    def _stream(self, request: GenRequest, event: Callable[[str], str], first: str | None = None) -> Answer:
        """Send 200 and the event-stream headers, then one event per decoded piece."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if first is not None:
            self._event(first)
        return self.api.engine.generate(request, lambda piece: self._event(event(piece)))

    def _event(self, data: str) -> None:
        self._chunk(f"data: {data}\n\n".encode())

    def _end_stream(self) -> None:
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise BadRequest(f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def _json(self, payload: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _empty(self, status: HTTPStatus) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _deprecated(self, path: str, current: str) -> None:
        if path != current:
            self.api.log.info(
                f"Endpoint '{path}' is deprecated and will be removed in a future version. Please use '{current}' "
                "instead."
            )

    def log_request(self, code: int) -> None:
        host, port = self.client_address[:2]
        self.api.log.info(f'INFO:     {host}:{port} - "{self.requestline}" {code} {HTTPStatus(code).phrase}')


def _request_id() -> str:
    """32 hex digits, as SGLang's uuid4().hex request ids (the uuid module is 3 ms of the start)."""
    return os.urandom(16).hex()


def _in_parallel(work: Callable[[GenRequest], dict[str, Any]], requests: list[GenRequest]) -> list[dict[str, Any]]:
    """`work` on every request at once, a thread each, the results in order."""
    results: list[dict[str, Any]] = [{} for _ in requests]
    errors: list[BaseException] = []

    def one(index: int, request: GenRequest) -> None:
        try:
            results[index] = work(request)
        except BaseException as exc:  # re-raised in the handler's thread, as the executor did
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i, r), daemon=True) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def _request(prompt: str, params: dict[str, Any], tokens_key: str, default_tokens: int) -> GenRequest:
    try:
        temperature = float(params["temperature"]) if params.get("temperature") is not None else 1.0
        max_tokens = int(params[tokens_key]) if params.get(tokens_key) is not None else default_tokens
        seed = params.get("sampling_seed", params.get("seed"))
        ignore_eos = params.get("ignore_eos") is True
        return GenRequest(prompt, temperature, max(1, max_tokens), int(seed) if seed is not None else None, ignore_eos)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"invalid sampling parameters: {exc}") from None


def _usage(prompt: str, answer: Answer) -> dict[str, Any]:
    prompt_tokens = count_tokens(prompt)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": prompt_tokens + answer.completion_tokens,
        "prompt_tokens_details": None,
    }


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    raise BadRequest("messages: no user message")


def _meta(rid: str, request: GenRequest, answer: Answer) -> dict[str, Any]:
    finish: dict[str, Any] = (
        {"type": "length", "length": answer.completion_tokens}
        if answer.finish == "length"
        else {"type": "stop", "matched": EOS_TOKEN}
    )
    return {
        "id": rid,
        "finish_reason": finish,
        "prompt_tokens": count_tokens(request.prompt),
        "completion_tokens": answer.completion_tokens,
        "cached_tokens": 0,
        "weight_version": "default",
        "total_retractions": 0,
    }
