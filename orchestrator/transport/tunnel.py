"""HTTP to a port on the far side of SSH, without a local listening port.

SGLang listens on the host's 127.0.0.1 by default, so probes must travel inside the SSH
connection. Fabric's `forward_local` costs ~10 ms per new connection (it polls accept() every
10 ms), copies in 1 KiB chunks and wedges if the remote port is not up yet (testhost.md §6);
opening a `direct-tcpip` channel per HTTP connection through httpcore costs ~1 ms and needs no
local port at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

ChannelOpener = Callable[[str, int, "float | None"], Any]
"""(remote host, remote port, timeout) -> an open paramiko direct-tcpip channel."""


class _ChannelStream(httpcore.NetworkStream):
    def __init__(self, channel: Any):
        self._channel = channel

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._channel.settimeout(timeout)
        try:
            data: bytes = self._channel.recv(max_bytes)
            return data
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._channel.settimeout(timeout)
        try:
            self._channel.sendall(buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    def close(self) -> None:
        self._channel.close()

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # httpcore asks this to drop keep-alive connections the server already closed.
            ch = self._channel
            return ch.recv_ready() or ch.closed or ch.eof_received
        return None


class _ChannelBackend(httpcore.NetworkBackend):
    def __init__(self, opener: ChannelOpener):
        self._opener = opener

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            return _ChannelStream(self._opener(host, port, timeout))
        except Exception as exc:  # paramiko's ChannelException and friends: the remote port refused
            raise httpcore.ConnectError(str(exc)) from exc

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class TunnelTransport(httpx.BaseTransport):
    """An httpx transport whose TCP connections are SSH direct-tcpip channels (host resolved remotely)."""

    def __init__(self, opener: ChannelOpener, max_connections: int = 16):
        self._pool = httpcore.ConnectionPool(network_backend=_ChannelBackend(opener), max_connections=max_connections)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request through the pool, mapping httpcore errors as httpx's own transport does."""
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            resp = self._pool.handle_request(req)
        except httpcore.ConnectError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except httpcore.TimeoutException as exc:
            raise httpx.ReadTimeout(str(exc), request=request) from exc
        except httpcore.NetworkError as exc:
            raise httpx.ReadError(str(exc), request=request) from exc
        except httpcore.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        assert isinstance(resp.stream, Iterable)
        return httpx.Response(
            status_code=resp.status,
            headers=resp.headers,
            stream=_ResponseStream(resp.stream, request),
            extensions=resp.extensions,
        )

    def close(self) -> None:
        """Close every pooled channel."""
        self._pool.close()


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes], request: httpx.Request):
        self._stream = stream
        self._request = request

    def __iter__(self) -> Any:
        try:
            yield from self._stream
        except httpcore.TimeoutException as exc:
            raise httpx.ReadTimeout(str(exc), request=self._request) from exc
        except (httpcore.NetworkError, httpcore.RemoteProtocolError) as exc:
            raise httpx.ReadError(str(exc), request=self._request) from exc

    def close(self) -> None:
        closer = getattr(self._stream, "close", None)
        if closer is not None:
            closer()
