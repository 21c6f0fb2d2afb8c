"""HTTP/1.1 hardening for the local server (``make run``, :mod:`chalicelib.local`).

Chalice's local server is ``http.server`` underneath: it reads whatever ``Content-Length``
says before anything can refuse it, waits forever on a silent client, starts one thread
per connection without limit, ignores ``Transfer-Encoding`` (a chunked body was read as
the next request) and fails on a ``Content-Length`` that is not a number. Here:

* **Framing** (:func:`body_length`): one ``Content-Length`` (repeats must agree), a
  non-negative decimal, or ``Transfer-Encoding: chunked`` alone; anything else is a 400
  in the error envelope, and a length over the API's body limit (``TE_MAX_BODY_BYTES``) a
  413, both answered before the body is read (before ``100 Continue`` too), and the
  connection closed. Malformed header lines (``Content-Length : 5``) are a 400, not a
  header silently dropped.
* **Chunked bodies** (:func:`read_chunked`) are decoded, up to the same limit, and handed
  to the route like any other body.
* **Time**: a connection has :data:`HEAD_TIMEOUT_SEC` to deliver a request's line and
  headers (the keep-alive wait before them included) and :data:`REQUEST_TIMEOUT_SEC` for
  the whole request, body included, however it trickles in (:class:`DeadlineReader`);
  then it is closed. Writes time out alike.
* **Threads** (:class:`BoundedThreads`): at most :data:`MAX_CONNECTIONS` connections are
  open at once, one thread each, and at most :data:`MAX_HANDLER_THREADS` of them run the
  app at once: a connection takes a handler slot only once its whole request is read, so
  clients that send slowly (or not at all) hold a connection, never a handler, and leave
  room for the others. Past the connection cap the accept loop waits, so further
  connections wait in the listen backlog and are answered in turn, rather than refused
  with a 503 (a client of the local stack retries nothing by itself).
"""

from __future__ import annotations

import io
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any

from chalicelib.errors import InvalidRequest, PayloadTooLarge, TaskExecutorError

#: Seconds a connection gets to deliver one request, idle keep-alive time included.
REQUEST_TIMEOUT_SEC = 15.0
#: Seconds of those for the request line and headers: a slow client is let go sooner.
HEAD_TIMEOUT_SEC = 5.0
#: Requests the app handles at once; the others wait for a slot, their request read.
MAX_HANDLER_THREADS = 64
#: Connections open at once (one thread each, most of them reading or idle); the others
#: wait in the listen backlog. Far above the handlers, so slow clients leave room.
MAX_CONNECTIONS = 512
#: Longest chunk-size line (with its extensions) and trailer line accepted.
MAX_CHUNK_LINE = 4096
MAX_TRAILER_LINES = 64

_DECIMAL = re.compile(r"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")


class ClientGone(Exception):
    """The client closed the connection in the middle of a request."""


def body_length(headers: Message, max_bytes: int) -> int | None:
    """The body's length from its headers, or None for a chunked body.

    Raises :class:`InvalidRequest` (400) for anything ambiguous and
    :class:`PayloadTooLarge` (413) for a length over ``max_bytes``.
    """
    if headers.defects:
        raise InvalidRequest("Malformed header line in the request.")
    codings = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if codings:
        if lengths:
            raise InvalidRequest("Send Content-Length or Transfer-Encoding, not both.")
        _check_chunked(codings)
        return None
    return _content_length(lengths, max_bytes)


def _check_chunked(codings: list[str]) -> None:
    """``Transfer-Encoding: chunked`` alone; any other coding, or more than one, is a 400."""
    named = [c.strip().lower() for value in codings for c in value.split(",")]
    if named != ["chunked"]:
        raise InvalidRequest(
            f"Transfer-Encoding {', '.join(named)!r} is not supported: send the body "
            "with Content-Length or Transfer-Encoding: chunked."
        )


def _content_length(lengths: list[str], max_bytes: int) -> int:
    """The one length the ``Content-Length`` headers agree on (0 without one)."""
    values = {v.strip() for value in lengths for v in value.split(",")}
    if not values:
        return 0
    if len(values) > 1:
        raise InvalidRequest("Conflicting Content-Length values.")
    [value] = values
    if not _DECIMAL.fullmatch(value):
        raise InvalidRequest("Content-Length must be a non-negative integer.")
    if len(value) > 18 or int(value) > max_bytes:
        raise PayloadTooLarge(f"Request body exceeds {max_bytes} bytes.")
    return int(value)


def read_chunked(rfile: io.BufferedIOBase, max_bytes: int) -> bytes:
    """A chunked body, decoded; trailers are read and dropped. 400 for bad framing, 413
    as soon as a chunk size would take the body over ``max_bytes`` (before reading it)."""
    body = bytearray()
    while size := _chunk_size(_line(rfile)):
        if len(body) + size > max_bytes:
            raise PayloadTooLarge(f"Request body exceeds {max_bytes} bytes.")
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise ClientGone
        body += chunk
        if _line(rfile) != b"\r\n":
            raise InvalidRequest("Malformed chunked body: a chunk must end with CRLF.")
    for _ in range(MAX_TRAILER_LINES):
        if _line(rfile) == b"\r\n":
            return bytes(body)
    raise InvalidRequest("Malformed chunked body: too many trailer lines.")


def _line(rfile: io.BufferedIOBase) -> bytes:
    line = rfile.readline(MAX_CHUNK_LINE + 1)
    if not line:
        raise ClientGone
    if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\r\n"):
        raise InvalidRequest("Malformed chunked body: a line is too long or not CRLF-ended.")
    return line


def _chunk_size(line: bytes) -> int:
    size = line[:-2].partition(b";")[0].rstrip(b" \t")
    if not _HEX.fullmatch(size):
        raise InvalidRequest("Malformed chunked body: a chunk size is not hexadecimal.")
    return int(size, 16)


class DeadlineReader(io.RawIOBase):
    """A socket's reads, each bounded by the time left until :attr:`deadline`.

    A per-read timeout alone lets a client that sends a byte now and then hold its thread
    forever. The socket's own timeout is put back after each read, for the writes.
    """

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self.deadline = time.monotonic() + timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not received in time")
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        except (ConnectionResetError, ConnectionAbortedError):
            return 0  # the client is gone: read as the end of the stream
        finally:
            self._sock.settimeout(self._timeout)


def send_envelope(handler: BaseHTTPRequestHandler, error: TaskExecutorError) -> None:
    """Answer ``error`` in the API's error envelope and close the connection."""
    from chalicelib.api.http import error_body

    request_id = "req_" + secrets.token_hex(12)
    body = json.dumps(error_body(error.code, error.message, request_id)).encode()
    handler.close_connection = True
    try:
        handler.send_response(error.status, error.message)
        for name, value in (
            ("Content-Type", "application/json"),
            ("X-Request-Id", request_id),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ):
            handler.send_header(name, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)
    except OSError:
        pass  # the client is gone; the connection is closed either way


class FramedRequestHandler(BaseHTTPRequestHandler):
    """``http.server``'s handler with the framing, limits and deadline described above.

    Subclasses call :meth:`read_body` in their ``do_*`` methods: it returns the body, or
    None once it has answered (or dropped) a request whose body cannot be read.
    """

    #: Seconds per request (:data:`REQUEST_TIMEOUT_SEC`); also the socket's write timeout.
    request_timeout: float = REQUEST_TIMEOUT_SEC
    #: Seconds for the request line and headers (:data:`HEAD_TIMEOUT_SEC`, at most the above).
    head_timeout: float = HEAD_TIMEOUT_SEC
    _started: float = 0.0
    _reader: DeadlineReader
    _length: int | None = -1  # -1: not checked yet; None: chunked

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.request_timeout)
        self.rfile.close()  # replaced by a reader that keeps the request's deadline
        self._reader = DeadlineReader(self.connection, self.request_timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        self._started = time.monotonic()
        self._reader.deadline = self._started + min(self.head_timeout, self.request_timeout)
        self._length = -1
        super().handle_one_request()

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # The head is in: the body gets the rest of the request's time.
        self._reader.deadline = self._started + self.request_timeout
        return self._framing_ok()

    def handle_expect_100(self) -> bool:
        # Refuse before the client sends the body it asked permission for.
        return self._framing_ok() and super().handle_expect_100()

    def body_limit(self) -> int:
        """The largest body accepted (the API's ``TE_MAX_BODY_BYTES``): subclasses say."""
        raise NotImplementedError

    def _framing_ok(self) -> bool:
        if self._length != -1:
            return True
        try:
            self._length = body_length(self.headers, self.body_limit())
        except TaskExecutorError as exc:
            send_envelope(self, exc)
            return False
        return True

    def read_body(self) -> bytes | None:
        """The request's body (b"" when it has none), or None when it was refused."""
        try:
            if self._length is None:
                return read_chunked(self.rfile, self.body_limit())
            body = self.rfile.read(self._length) if self._length > 0 else b""
            if len(body) < (self._length or 0):
                raise ClientGone
            return body
        except TaskExecutorError as exc:
            send_envelope(self, exc)
        except ClientGone:
            self.close_connection = True
        return None


class BoundedThreads:
    """Mixed into a ``socketserver.ThreadingMixIn`` server, before it: at most
    :attr:`max_threads` connections open at once (the accept loop waits for a free
    thread; the connections beyond wait in the listen backlog, ``request_queue_size``),
    and at most :attr:`max_handlers` of them in the app at once (:meth:`handling`)."""

    max_threads = MAX_CONNECTIONS
    max_handlers = MAX_HANDLER_THREADS
    _slots: threading.BoundedSemaphore | None = None
    _handlers: threading.BoundedSemaphore | None = None
    _stopping = False

    @contextmanager
    def handling(self) -> Iterator[None]:
        """Hold one of the :attr:`max_handlers` slots while a read request runs."""
        assert self._handlers is not None  # made by the accept loop before any thread
        self._handlers.acquire()
        try:
            yield
        finally:
            self._handlers.release()

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._slots is None:  # only the accept loop's thread gets here
            self._slots = threading.BoundedSemaphore(self.max_threads)
            self._handlers = threading.BoundedSemaphore(self.max_handlers)
        while not self._slots.acquire(timeout=0.5):
            if self._stopping:  # shutdown() is waiting for this loop
                self.shutdown_request(request)  # type: ignore[attr-defined]
                return
        try:
            super().process_request(request, client_address)  # type: ignore[misc]
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            assert self._slots is not None
            self._slots.release()

    def shutdown(self) -> None:
        self._stopping = True
        super().shutdown()  # type: ignore[misc]
