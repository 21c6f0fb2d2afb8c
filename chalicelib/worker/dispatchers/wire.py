"""A lean HTTP/1.1 client for the worker's delivery loop: asyncio.Protocol and keep-alive pools.

Built for throughput on one event loop: one ``transport.write`` per request, a response
parser driven from ``data_received`` that wakes the caller once per response (framing and
parsing are in :mod:`chalicelib.worker.dispatchers.http1`), and no http.client or
email.parser on the hot path. It does only what delivery needs: TLS with verification
(the default CA store, which OpenSSL lets ``SSL_CERT_FILE``/``SSL_CERT_DIR`` replace), an
HTTP proxy per :class:`Origin` (a ``CONNECT`` tunnel for https, absolute-form requests for
http); no redirects (a 3xx is a response like any other), compression or streaming. Every
failure is a :class:`WireError` whose message is safe to store (it never quotes request
headers or body).
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
from chalicelib.worker.dispatchers.proxy import Proxy

__all__ = [
    "ConnectFailed",
    "HttpClient",
    "NotSent",
    "Origin",
    "ProtocolError",
    "Proxy",
    "Response",
    "ResponseTimeout",
    "TlsVerifyFailed",
    "WireError",
]

#: How long :meth:`HttpClient.close` waits for idle connections to close cleanly.
CLOSE_GRACE_S = 1.0
#: Idle connections older than this are not reused: servers close idle keep-alive
#: connections after a few seconds (gunicorn 2 s, Node and Apache 5 s), and a request
#: written as the server closes cannot be sent again (one attempt, one send).
IDLE_TTL_S = 1.0


class Origin(NamedTuple):
    """Where a request goes; connections are pooled per origin (proxy included)."""

    scheme: str  # "http" | "https"
    address: str  # IP or hostname to connect to (IPv6 without brackets)
    port: int
    server_hostname: str  # TLS SNI and certificate hostname check (https only)
    #: Through this proxy, which is asked for ``address:port`` (it connects, not us).
    proxy: Proxy | None = None

    @property
    def authority(self) -> str:
        """``address:port`` as a request-target names it (IPv6 in brackets)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


class ConnectFailed(WireError):
    """DNS failure, refused, unreachable, TLS handshake/verification failure. Nothing was
    sent."""


class TlsVerifyFailed(ConnectFailed):
    """The target's certificate did not verify (untrusted CA, wrong name, expired)."""


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
        "_tunnel",
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
        self._tunnel = False  # the response awaited is a proxy's answer to CONNECT
        self.closed = False  # the peer closed or the connection failed: never reuse
        self.idle_since = 0.0  # loop time when it went back to the pool
        self.lost: asyncio.Future[None] = self._loop.create_future()

    @property
    def usable(self) -> bool:
        return not self.closed and not self._transport.is_closing()

    def send(
        self, payload: bytes, *, head_only: bool, body_limit: int, tunnel: bool = False
    ) -> asyncio.Future[Response]:
        """Write one request; the future resolves with its response."""
        if not self.usable:
            raise NotSent("connection closed before the request was written")
        self._parser = ResponseParser(head_only=head_only, body_limit=body_limit)
        self._tunnel = tunnel
        self._waiter = self._loop.create_future()
        self._transport.write(payload)
        return self._waiter

    async def start_tls(self, context: ssl.SSLContext, server_hostname: str) -> None:
        """Upgrade this (tunnelled) connection to TLS with the target itself."""
        try:
            transport = await self._loop.start_tls(
                self._transport, self, context, server_hostname=server_hostname
            )
        except OSError as exc:
            raise _connect_failed(exc) from exc
        if transport is None:
            raise ConnectFailed("TLS: the tunnel closed during the handshake")
        self._transport = cast(asyncio.Transport, transport)

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
        # Leftover bytes: the stream is out of step. A proxy's "Connection: close" or
        # HTTP/1.0 on its CONNECT answer concerns the proxy's exchange, not the tunnel.
        if self._buffer or not (parser.reusable or self._tunnel):
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
        proxy = origin.proxy
        if proxy is not None and origin.scheme == "http":
            # Absolute form (RFC 9112 §3.2.2): the proxy connects to the authority named.
            target = f"http://{origin.authority}{target}"
            if proxy.authorization is not None:
                headers = [*headers, ("Proxy-Authorization", proxy.authorization)]
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
        """A fresh connection to the target, or through its proxy's tunnel. A failure here
        is a :class:`ConnectFailed`: nothing reached the target."""
        https = origin.scheme == "https"
        if origin.proxy is None:
            return await self._open(origin.address, origin.port, https, origin.server_hostname)
        proxy = origin.proxy
        try:
            conn = await self._open(proxy.host, proxy.port, False, proxy.host)
        except ConnectFailed as exc:
            raise ConnectFailed(f"proxy: {exc}") from exc
        if https:
            await self._tunnel(conn, origin, proxy)
        return conn

    async def _open(self, host: str, port: int, tls: bool, server_hostname: str) -> _Connection:
        loop = asyncio.get_running_loop()
        context = self._tls_context() if tls else None
        try:
            # asyncio sets TCP_NODELAY on TCP transports itself.
            _, conn = await loop.create_connection(
                _Connection,
                host,
                port,
                ssl=context,
                server_hostname=server_hostname if context else None,
            )
        except OSError as exc:  # ssl.SSLError and socket.gaierror included
            raise _connect_failed(exc) from exc
        return conn

    async def _tunnel(self, conn: _Connection, origin: Origin, proxy: Proxy) -> None:
        """``CONNECT address:port`` through the proxy, then TLS with the target's name."""
        headers = [("Host", origin.authority)]
        if proxy.authorization is not None:
            headers.append(("Proxy-Authorization", proxy.authorization))
        payload = encode_request("CONNECT", origin.authority, headers, None)
        try:
            answer = await conn.send(payload, head_only=True, body_limit=0, tunnel=True)
            if not 200 <= answer.status < 300:
                reason = answer.reason[:80]
                raise ConnectFailed(f"proxy refused the tunnel: {answer.status} {reason}")
            await conn.start_tls(self._tls_context(), origin.server_hostname)
        except ProtocolError as exc:
            conn.abort()
            raise ConnectFailed(f"proxy: {exc}") from exc
        except BaseException:
            conn.abort()
            raise

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()  # loads CA files: once
        return self._ssl_context


def _connect_failed(exc: OSError) -> ConnectFailed:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TlsVerifyFailed(_connect_reason(exc))
    return ConnectFailed(_connect_reason(exc))


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
