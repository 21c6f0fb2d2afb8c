"""HTTP/1.1 message framing for :mod:`chalicelib.worker.dispatchers.wire` (no I/O).

Request encoding (one buffer per request, framing headers ours alone) and an incremental
response parser fed from ``data_received``. Split from the client so each stays small;
nothing here knows about sockets or event loops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: The status line plus header block (and, separately, a chunked trailer block) may not
#: exceed this.
MAX_HEAD = 64 * 1024
#: Body bytes past ``body_limit`` that are read and thrown away to keep a connection
#: reusable; a longer remainder costs less as a new connection than as a drain.
DRAIN_LIMIT = 64 * 1024

_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_VERSIONS = frozenset({"HTTP/1.1", "HTTP/1.0"})
_HEX = b"0123456789abcdefABCDEF"


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


class ProtocolError(WireError):
    """Malformed response, or the connection closed mid-response."""


class ClosedBeforeResponse(ProtocolError):
    """The connection failed after the request was written and before any response byte.
    The target may have read the request, so it is not sent again: the attempt fails."""


def encode_request(
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


#: Digits of a Content-Length accepted (up to an exabyte); more is a malformed answer,
#: not a number to convert (``int`` refuses thousands of digits with a ValueError).
_LENGTH_DIGITS = 18


def _content_length(value: str) -> int:
    """The length, tolerating a repeated identical value ("5, 5") as RFC 9110 §8.6 allows."""
    if value.isascii() and value.isdigit() and len(value) <= _LENGTH_DIGITS:
        return int(value)  # the usual answer: one plain number
    first, *rest = (part.strip() for part in value.split(","))
    if (
        first.isascii()
        and first.isdigit()
        and len(first) <= _LENGTH_DIGITS
        and all(part == first for part in rest)
    ):
        return int(first)
    raise ProtocolError("invalid Content-Length")


class ResponseParser:
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
            raise ClosedBeforeResponse("connection closed before a response")
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
