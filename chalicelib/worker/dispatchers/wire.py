"""A lean HTTP/1.1 client for the worker's delivery loop: asyncio.Protocol and keep-alive pools.

Built for throughput on one event loop: one ``transport.write`` per request, a response
parser driven from ``data_received`` that wakes the caller once per response (framing and
parsing are in :mod:`chalicelib.worker.dispatchers.http1`), and no http.client or
email.parser on the hot path. It does only what delivery needs: no
redirects, proxies, compression or streaming. Every failure is a :class:`WireError`
whose message is safe to store (it never quotes request headers or body).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Sequence
from typing import NamedTuple, cast

from chalicelib.worker.dispatchers.http1 import (
    ProtocolError,
    Response,
    ResponseParser,
    WireError,
    encode_request,
)

__all__ = [
    "ConnectFailed",
    "HttpClient",
    "NotSent",
    "Origin",
    "ProtocolError",
    "Response",
    "ResponseTimeout",
    "WireError",
]

#: How long :meth:`HttpClient.close` waits for idle connections to close cleanly.
CLOSE_GRACE_S = 1.0
#: Idle connections older than this are not reused: servers close idle keep-alive
#: connections after a few seconds (gunicorn 2 s, Node and Apache 5 s), and a request
#: written as the server closes cannot be sent again (one attempt, one send).
IDLE_TTL_S = 1.0


class Origin(NamedTuple):
    """Where a request goes; connections are pooled per origin."""

    scheme: str  # "http" | "https"
    address: str  # IP or hostname to connect to (IPv6 without brackets)
    port: int
    server_hostname: str  # TLS SNI and certificate hostname check (https only)


class ConnectFailed(WireError):
    """DNS failure, refused, unreachable, TLS handshake/verification failure. Nothing was
    sent."""


class NotSent(WireError):
    """The connection was found closed before the request was written: provably never
    sent, so it may be sent on a fresh connection."""


class ResponseTimeout(WireError):
    """The whole exchange (connect+send+response) exceeded ``timeout``."""


class _Connection(asyncio.Protocol):
    """One connection: feeds the parser and resolves the in-flight response's future."""

    __slots__ = (
        "_buffer",
        "_loop",
        "_parser",
        "_transport",
        "_waiter",
        "closed",
        "idle_since",
        "lost",
    )

    _transport: asyncio.Transport

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._parser: ResponseParser | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self.closed = False  # the peer closed or the connection failed: never reuse
        self.idle_since = 0.0  # loop time when it went back to the pool
        self.lost: asyncio.Future[None] = self._loop.create_future()

    @property
    def usable(self) -> bool:
        return not self.closed and not self._transport.is_closing()

    def send(self, payload: bytes, *, head_only: bool, body_limit: int) -> asyncio.Future[Response]:
        """Write one request; the future resolves with its response."""
        if not self.usable:
            raise NotSent("connection closed before the request was written")
        self._parser = ResponseParser(head_only=head_only, body_limit=body_limit)
        self._waiter = self._loop.create_future()
        self._transport.write(payload)
        return self._waiter

    def close(self) -> None:
        self.closed = True
        self._transport.close()

    def abort(self) -> None:
        self.closed = True
        self._transport.abort()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:
            # Bytes nobody asked for while idle: the stream is out of step, drop it.
            self.abort()
            return
        self._buffer += data
        try:
            done = parser.feed(self._buffer)
        except ProtocolError as exc:
            self._fail(exc)
            return
        if done:
            self._complete(parser)

    def eof_received(self) -> None:
        self.closed = True
        self._end(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._end(exc)
        if not self.lost.done():
            self.lost.set_result(None)

    def _end(self, error: BaseException | None) -> None:
        parser = self._parser
        if parser is None:
            return
        try:
            parser.feed_eof(error)
        except ProtocolError as exc:
            self._fail(exc)
            return
        self._complete(parser)

    def _complete(self, parser: ResponseParser) -> None:
        self._parser = None
        if not parser.reusable or self._buffer:  # leftover bytes: the stream is out of step
            self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(parser.response())

    def _fail(self, exc: ProtocolError) -> None:
        self._parser = None
        self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class HttpClient:
    """HTTP/1.1 with a keep-alive pool per :class:`Origin`, for use from one event loop.

    Nothing is bound to a loop until the first request, so it can be built anywhere.
    """

    def __init__(
        self, *, max_idle_per_origin: int = 50, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._max_idle = max_idle_per_origin
        self._ssl_context = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._closed = False

    async def request(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        *,
        timeout: float,
        body_limit: int,
    ) -> Response:
        """Send one request and read its response within ``timeout`` seconds in all.

        Raises a :class:`WireError`, or ValueError when a header carries CR, LF or NUL.
        """
        if self._closed:
            raise RuntimeError("HttpClient is closed")
        payload = encode_request(method, target, headers, body)
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(origin, payload, method == "HEAD", body_limit)
        except TimeoutError:
            raise ResponseTimeout(f"no response within {int(timeout * 1000)} ms") from None

    async def close(self) -> None:
        """Close idle connections; in-flight ones close when their exchange ends."""
        self._closed = True
        idle = [conn for conns in self._idle.values() for conn in conns]
        self._idle.clear()
        for conn in idle:
            conn.close()
        pending = [conn.lost for conn in idle if not conn.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_GRACE_S)
        for conn in idle:
            if not conn.lost.done():
                conn.abort()  # a TLS peer that never answers close_notify

    async def _exchange(
        self, origin: Origin, payload: bytes, head_only: bool, body_limit: int
    ) -> Response:
        conn = self._take_idle(origin)
        if conn is not None:
            try:
                return await self._roundtrip(origin, conn, payload, head_only, body_limit)
            except NotSent:
                # Found closed before a byte was written: the only case sent again. Once
                # the request is written, any failure is the attempt's result (one
                # attempt, one send): the server may have read it, and the retry policy
                # decides, under a new attempt number.
                pass
        conn = await self._connect(origin)
        return await self._roundtrip(origin, conn, payload, head_only, body_limit)

    async def _roundtrip(
        self, origin: Origin, conn: _Connection, payload: bytes, head_only: bool, body_limit: int
    ) -> Response:
        try:
            response = await conn.send(payload, head_only=head_only, body_limit=body_limit)
        except BaseException:
            # Error, timeout or cancellation: the stream is in an unknown state.
            conn.abort()
            raise
        idle = self._idle.setdefault(origin, [])
        if conn.usable and not self._closed and len(idle) < self._max_idle:
            conn.idle_since = asyncio.get_running_loop().time()
            idle.append(conn)
        else:
            conn.close()
        return response

    def _take_idle(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest = asyncio.get_running_loop().time() - IDLE_TTL_S
        while idle:
            conn = idle.pop()  # LIFO: the warmest connection is least likely to be stale
            if conn.usable and conn.idle_since >= oldest:
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if origin.scheme == "https" else None
        try:
            # asyncio sets TCP_NODELAY on TCP transports itself.
            _, conn = await loop.create_connection(
                _Connection,
                origin.address,
                origin.port,
                ssl=tls,
                server_hostname=origin.server_hostname if tls else None,
            )
        except OSError as exc:  # ssl.SSLError and socket.gaierror included
            raise ConnectFailed(_connect_reason(exc)) from exc
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()  # loads CA files: once
        return self._ssl_context


def _connect_reason(exc: OSError) -> str:
    """A short reason from address-level facts only."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, socket.gaierror):
        return f"DNS lookup failed: {exc.strerror}"
    if isinstance(exc, TimeoutError):
        return "TLS handshake timed out"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
