"""A lean HTTP/1.1 client for the worker's delivery loop: asyncio.Protocol and keep-alive pools.

Built for throughput on one event loop: one ``transport.write`` per request, a response
parser driven from ``data_received`` that wakes the caller once per response, and no
http.client or email.parser on the hot path. It does only what delivery needs: no
redirects, proxies, compression or streaming. Every failure is a :class:`WireError`
whose message is safe to store (it never quotes request headers or body).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

#: The status line plus header block (and, separately, a chunked trailer block) may not
#: exceed this.
MAX_HEAD = 64 * 1024
#: Body bytes past ``body_limit`` that are read and thrown away to keep a connection
#: reusable; a longer remainder costs less as a new connection than as a drain.
DRAIN_LIMIT = 64 * 1024
#: How long :meth:`HttpClient.close` waits for idle connections to close cleanly.
CLOSE_GRACE_S = 1.0

_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_VERSIONS = frozenset({"HTTP/1.1", "HTTP/1.0"})
_HEX = b"0123456789abcdefABCDEF"


class Origin(NamedTuple):
    """Where a request goes; connections are pooled per origin."""

    scheme: str  # "http" | "https"
    address: str  # IP or hostname to connect to (IPv6 without brackets)
    port: int
    server_hostname: str  # TLS SNI and certificate hostname check (https only)


@dataclass(frozen=True, slots=True)
class Response:
    """A final response; ``body`` holds at most ``body_limit`` bytes of the decoded body."""

    status: int
    reason: str
    headers: Mapping[str, str]  # lower-cased names; repeated fields joined with ", "
    body: bytes


class WireError(Exception):
    """Base; str(exc) is a short human reason (never request headers/body: they can carry
    secrets)."""


class ConnectFailed(WireError):
    """DNS failure, refused, unreachable, TLS handshake/verification failure. Nothing was
    sent."""


class ResponseTimeout(WireError):
    """The whole exchange (connect+send+response) exceeded ``timeout``."""


class ProtocolError(WireError):
    """Malformed response, or the connection closed mid-response."""


class _ClosedBeforeResponse(ProtocolError):
    """The connection failed before any response byte: on a reused one, the stale
    keep-alive race, which is safe to retry."""


def _encode_request(
    method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes | None
) -> bytes:
    """Request line, headers and body as one buffer; the framing headers are ours alone."""
    if " " in method or " " in target:
        raise ValueError("method or target contains a space")
    lines = [f"{method} {target} HTTP/1.1"]
    # A caller's framing header could disagree with ours and smuggle a second request.
    lines += [f"{n}: {v}" for n, v in headers if n.lower() not in _FRAMING_HEADERS]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    elif method in _BODY_METHODS:
        lines.append("Content-Length: 0")
    lines.append("\r\n")
    text = "\r\n".join(lines)
    # Our separators are the only line breaks allowed: one scan of the whole head is
    # cheaper than a search per field.
    if text.count("\n") != len(lines) or text.count("\r") != len(lines) or "\0" in text:
        raise ValueError("the request line or a header contains CR, LF or NUL")
    head = text.encode()
    return head + body if body else head


def _parse_fields(lines: list[str]) -> dict[str, str]:
    """Header lines to a dict of lower-cased names; repeats joined with ", "."""
    fields: dict[str, str] = {}
    name = ""
    for line in lines:
        if name and line[:1] in (" ", "\t"):
            # Obsolete line folding: RFC 9112 §5.2 has clients unfold it to a space.
            fields[name] += " " + line.strip(" \t")
            continue
        raw, colon, value = line.partition(":")
        name = raw.strip().lower()
        if not colon or not name:
            raise ProtocolError("malformed header line")
        value = value.strip(" \t")
        prior = fields.get(name)
        fields[name] = value if prior is None else f"{prior}, {value}"
    return fields


def _content_length(value: str) -> int:
    """The length, tolerating a repeated identical value ("5, 5") as RFC 9110 §8.6 allows."""
    if value.isdigit() and value.isascii():
        return int(value)
    first, *rest = (part.strip() for part in value.split(","))
    if first.isascii() and first.isdigit() and all(part == first for part in rest):
        return int(first)
    raise ProtocolError("invalid Content-Length")


class _ResponseParser:
    """Incremental parser of one response, fed from ``data_received``; it never waits.

    ``_step`` is the current state: each step consumes what it can from the buffer and
    returns whether it made progress.
    """

    __slots__ = (
        "_body",
        "_discarded",
        "_head_only",
        "_headers",
        "_limit",
        "_reason",
        "_remaining",
        "_scan_from",
        "_status",
        "_step",
        "_to_eof",
        "done",
        "reusable",
        "started",
    )

    def __init__(self, *, head_only: bool, body_limit: int) -> None:
        self._head_only = head_only
        self._limit = body_limit
        self._step: Callable[[bytearray], bool] = self._read_head
        self._scan_from = 0
        self._remaining = 0
        self._discarded = 0
        self._to_eof = False
        self._body = bytearray()
        self._status = 0
        self._reason = ""
        self._headers: dict[str, str] = {}
        self.started = False
        self.done = False
        self.reusable = True

    def feed(self, buf: bytearray) -> bool:
        """Consume what ``buf`` holds; True once the response is complete."""
        self.started = True
        while not self.done and self._step(buf):
            pass
        return self.done

    def feed_eof(self, error: BaseException | None) -> None:
        """The connection ended: that completes a read-until-close body, else cuts it short."""
        if not self.started:
            raise _ClosedBeforeResponse("connection closed before a response")
        if self._to_eof and error is None:
            self.done = True
            return
        raise ProtocolError("connection closed mid-response")

    def response(self) -> Response:
        return Response(self._status, self._reason, self._headers, bytes(self._body))

    def _read_head(self, buf: bytearray) -> bool:
        end = buf.find(b"\r\n\r\n", self._scan_from)
        if end < 0 or end > MAX_HEAD:
            if len(buf) > MAX_HEAD:
                raise ProtocolError("response headers exceed 64 KiB")
            self._scan_from = max(0, len(buf) - 3)  # don't rescan what cannot hold the end
            return False
        # latin-1 maps every byte to one character: decoding cannot fail.
        head = buf[:end].decode("latin-1")
        del buf[: end + 4]
        self._scan_from = 0
        http10 = self._parse_head(head)
        if 100 <= self._status < 200 and self._status != 101:
            return True  # interim (100 Continue, 103 Early Hints): the final response follows
        self._set_reusable(http10)
        self._select_framing()
        return True

    def _parse_head(self, head: str) -> bool:
        """Status line and fields; returns whether the response is HTTP/1.0."""
        lines = head.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, self._reason = rest.partition(" ")
        if version not in _VERSIONS or len(code) != 3 or not (code.isascii() and code.isdigit()):
            raise ProtocolError("malformed status line")
        self._status = int(code)
        self._headers = _parse_fields(lines[1:])
        return version == "HTTP/1.0"

    def _set_reusable(self, http10: bool) -> None:
        value = self._headers.get("connection")
        options = {part.strip() for part in value.lower().split(",")} if value else set()
        self.reusable = "keep-alive" in options if http10 else "close" not in options

    def _select_framing(self) -> None:
        """Body framing per RFC 9112 §6.3."""
        status = self._status
        if self._head_only or status in (204, 304) or status < 200:
            if status == 101:
                self.reusable = False  # the connection now speaks another protocol
            self.done = True
            return
        coding = self._headers.get("transfer-encoding")
        length = self._headers.get("content-length")
        if coding is not None:
            if length is not None:
                self.reusable = False  # both framings: a smuggling sign, trust nothing after
            if coding.rpartition(",")[2].strip().lower() == "chunked":
                self._step = self._read_chunk_size
            else:
                self._read_until_eof()
        elif length is not None:
            self._expect_length(_content_length(length))
        else:
            self._read_until_eof()

    def _expect_length(self, length: int) -> None:
        if length > self._limit + DRAIN_LIMIT:
            length = self._limit  # keep what is wanted, then drop the connection
            self.reusable = False
        self._remaining = length
        self._step = self._read_length
        self.done = length == 0

    def _read_until_eof(self) -> None:
        self.reusable = False
        self._to_eof = True
        self._step = self._read_to_eof
        self.done = self._limit <= 0

    def _take(self, buf: bytearray, count: int) -> None:
        """Move ``count`` bytes out of ``buf``, keeping those under the body limit."""
        keep = min(count, max(0, self._limit - len(self._body)))
        if keep:
            self._body += buf[:keep]
        self._discarded += count - keep
        del buf[:count]

    def _read_length(self, buf: bytearray) -> bool:
        count = min(self._remaining, len(buf))
        if not count:
            return False
        self._take(buf, count)
        self._remaining -= count
        self.done = not self._remaining
        return True

    def _read_to_eof(self, buf: bytearray) -> bool:
        if not buf:
            return False
        self._take(buf, len(buf))
        self.done = len(self._body) >= self._limit  # the limit reached: close, don't drain
        return True

    def _read_chunk_size(self, buf: bytearray) -> bool:
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                raise ProtocolError("chunk size line too long")
            return False
        size = buf[:end].partition(b";")[0].strip()  # extensions are ignored
        del buf[: end + 2]
        if not size or len(size) > 16 or size.strip(_HEX):
            raise ProtocolError("malformed chunk size")
        self._remaining = int(size, 16)
        self._step = self._read_chunk_data if self._remaining else self._read_trailers
        return True

    def _read_chunk_data(self, buf: bytearray) -> bool:
        count = min(self._remaining, len(buf))
        if not count:
            return False
        self._take(buf, count)
        self._remaining -= count
        if self._discarded > DRAIN_LIMIT:
            # The total length is unknown and the excess already exceeds what is worth
            # draining: stop here and drop the connection.
            self.reusable = False
            self.done = True
        elif not self._remaining:
            self._step = self._read_chunk_end
        return True

    def _read_chunk_end(self, buf: bytearray) -> bool:
        if len(buf) < 2:
            return False
        if buf[:2] != b"\r\n":
            raise ProtocolError("malformed chunk")
        del buf[:2]
        self._step = self._read_chunk_size
        return True

    def _read_trailers(self, buf: bytearray) -> bool:
        end = -2 if buf[:2] == b"\r\n" else buf.find(b"\r\n\r\n")
        if end == -1:
            if len(buf) > MAX_HEAD:
                raise ProtocolError("trailer fields exceed 64 KiB")
            return False
        del buf[: end + 4]  # trailer fields are ignored
        self.done = True
        return True


class _Connection(asyncio.Protocol):
    """One connection: feeds the parser and resolves the in-flight response's future."""

    __slots__ = ("_buffer", "_loop", "_parser", "_transport", "_waiter", "closed", "lost")

    _transport: asyncio.Transport

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._parser: _ResponseParser | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self.closed = False  # the peer closed or the connection failed: never reuse
        self.lost: asyncio.Future[None] = self._loop.create_future()

    @property
    def usable(self) -> bool:
        return not self.closed and not self._transport.is_closing()

    def send(self, payload: bytes, *, head_only: bool, body_limit: int) -> asyncio.Future[Response]:
        """Write one request; the future resolves with its response."""
        if not self.usable:
            raise _ClosedBeforeResponse("connection closed before a response")
        self._parser = _ResponseParser(head_only=head_only, body_limit=body_limit)
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

    def _complete(self, parser: _ResponseParser) -> None:
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
        payload = _encode_request(method, target, headers, body)
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
            except _ClosedBeforeResponse:
                # The stale keep-alive race: the server closed this idle connection as we
                # reused it. Sending again is safe: every delivery carries an
                # Idempotency-Key and delivery is at-least-once anyway.
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
            idle.append(conn)
        else:
            conn.close()
        return response

    def _take_idle(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()  # LIFO: the warmest connection is least likely to be stale
            if conn.usable:
                return conn
            conn.abort()
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
