"""The simulated server's HTTP/1.1: keep-alive connections, a thread each, GET and POST with a Content-Length body;
and the one request the server sends itself (its warm-up).

The stdlib's http.server would do, but it imports http.client, email and ssl: 40 ms of every simulated launch's
start, before its first log line, that a real SGLang does not spend. The simulator needs only this much of it.
Responses are written as uvicorn writes them (`date` and `server: uvicorn` headers); a request line or header
block that is not HTTP gets 400 and the connection closes, as h11 does.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import sys
import time
from http import HTTPStatus
from typing import Any

MAX_LINE = 65536
MAX_HEADERS = 100


class Headers(dict[str, str]):
    """Request headers by lower-case name."""

    def get(self, name: str, default: Any = None) -> Any:
        """The header's value, whatever the case of `name`."""
        return super().get(name.lower(), default)


class HttpServer(socketserver.ThreadingTCPServer):
    """One thread per connection; quiet about clients that hang up (uvicorn logs nothing for them either)."""

    allow_reuse_address = True
    daemon_threads = True
    # Python's default backlog of 5 overflows under the 8 concurrent probe requests (the client then
    # retries its SYN a second later); uvicorn listens with 2048.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print unexpected handler errors as socketserver does, but not dropped connections."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _BadRequest(Exception):
    pass


class RequestHandler(socketserver.StreamRequestHandler):
    """Reads requests off one connection and calls `do_GET` / `do_POST`; subclasses answer them."""

    disable_nagle_algorithm = True
    requestline = ""
    command = ""
    path = ""
    request_version = "HTTP/1.1"
    headers: Headers
    close_connection = False

    def handle(self) -> None:
        """Serve requests until the client closes, asks to close, or sends something that is not HTTP."""
        self._out: list[bytes] = []
        while not self.close_connection:
            try:
                if not self._read_request():
                    return
            except _BadRequest:
                self.close_connection = True
                self.send_response(HTTPStatus.BAD_REQUEST)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.close_connection = True
                self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            method()
            self.wfile.flush()

    def _read_request(self) -> bool:
        line = self.rfile.readline(MAX_LINE + 1)
        if not line:
            return False
        if len(line) > MAX_LINE:
            raise _BadRequest
        self.requestline = line.decode("iso-8859-1").rstrip("\r\n")
        parts = self.requestline.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _BadRequest
        self.command, self.path, self.request_version = parts
        self.headers = Headers()
        for _ in range(MAX_HEADERS + 1):
            raw = self.rfile.readline(MAX_LINE + 1)
            if len(raw) > MAX_LINE:
                raise _BadRequest
            text = raw.decode("iso-8859-1").rstrip("\r\n")
            if not text:
                break
            name, colon, value = text.partition(":")
            if not colon or not name.strip():
                raise _BadRequest
            self.headers[name.strip().lower()] = value.strip()
        else:
            raise _BadRequest
        connection = self.headers.get("Connection", "").lower()
        self.close_connection = connection == "close" or (
            self.request_version == "HTTP/1.0" and connection != "keep-alive"
        )
        return True

    def send_response(self, status: HTTPStatus) -> None:
        """Start the response: its status line, `date` and `server`; logs the request as uvicorn does."""
        self.log_request(status.value)
        self._out = [f"HTTP/1.1 {status.value} {status.phrase}\r\n".encode("latin-1")]
        self.send_header("date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()))
        self.send_header("server", "uvicorn")

    def send_header(self, name: str, value: str) -> None:
        """One response header."""
        self._out.append(f"{name}: {value}\r\n".encode("latin-1"))

    def end_headers(self) -> None:
        """Send the status line and headers (the body follows on `wfile`)."""
        if self.close_connection:
            self._out.append(b"connection: close\r\n")
        self._out.append(b"\r\n")
        self.wfile.write(b"".join(self._out))
        self._out = []

    def log_request(self, code: int) -> None:
        """Called for every response; subclasses write the access log."""

    def finish(self) -> None:
        with contextlib.suppress(OSError):  # the client hung up while the last bytes were in flight
            super().finish()


def request(
    host: str, port: int, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float
) -> tuple[int, str]:
    """One request on a connection of its own (closed after it): the status and the body."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or not status[1].isdigit():
        raise OSError(f"not an HTTP response from {host}:{port}: {head[:80]!r}")
    return int(status[1]), rest.decode(errors="replace")
