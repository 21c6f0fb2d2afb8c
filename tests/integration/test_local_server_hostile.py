"""The local server (``make run``) against hostile clients, over raw loopback sockets (issue
25, point 1): an oversized body is refused before it is read, malformed framing is a 400
envelope, chunked bodies are decoded, stalled clients are dropped, and the number of
handler threads is bounded."""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.environment import BOOTSTRAP_KEY
from tests.support.served import free_port

#: How long a test waits for an answer or a close before it fails (the server's own
#: request timeout is 1 s in the tests that are about it).
PATIENCE = 30.0
AUTH = f"Authorization: Bearer {BOOTSTRAP_KEY}\r\n".encode()

Serve = Callable[..., int]
Response = tuple[int, dict[str, str], bytes]


@pytest.fixture
def serve(chalice_app: Any) -> Iterator[Serve]:
    """Start the local API server on a free loopback port (``make_api_server`` options)."""
    from chalicelib.local.server import make_api_server

    servers: list[Any] = []

    def start(**options: Any) -> int:
        port = free_port()
        server = make_api_server(chalice_app, "127.0.0.1", port, **options)
        threading.Thread(target=server.server.serve_forever, daemon=True).start()
        servers.append(server)
        return port

    yield start
    for server in servers:
        server.shutdown()
        server.server.server_close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset counts as the close)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def exchange(port: int, request: bytes) -> list[Response]:
    """Send ``request`` (one or more pipelined requests), read until the server closes."""
    with connect(port) as sock:
        sock.sendall(request)
        return parse_responses(read_to_close(sock))


def parse_responses(data: bytes) -> list[Response]:
    """Successive HTTP/1.1 responses, each framed by its Content-Length."""
    responses: list[Response] = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        length = int(headers.get("content-length", "0"))
        responses.append((int(status_line.split()[1]), headers, rest[:length]))
        data = rest[length:]
    return responses


def assert_envelope(response: Response, status: int, code: str) -> dict[str, Any]:
    got_status, headers, body = response
    assert got_status == status, (response, body)
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "request_id"}
    assert error["code"] == code and error["message"]
    assert error["request_id"].startswith("req_")
    assert headers["x-request-id"] == error["request_id"]
    return dict(error)


# -- oversized bodies ---------------------------------------------------------------------


@pytest.mark.parametrize("expect", [b"", b"Expect: 100-continue\r\n"])
def test_a_body_over_the_limit_is_refused_413_without_being_read(
    serve: Serve, expect: bytes
) -> None:
    port = serve()
    forty_mib = 40 * 1024 * 1024
    head = (
        b"POST /jobs HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(forty_mib).encode() + b"\r\n" + expect + b"\r\n"
    )
    # Not a byte of the body is sent: the answer cannot have waited for it (the old server
    # read the 40 MiB first, and here would wait for them until PATIENCE ran out). The
    # server closing the connection is what ends read_to_close.
    [response] = exchange(port, head)  # no "100 Continue" before it either
    error = assert_envelope(response, 413, "PAYLOAD_TOO_LARGE")
    assert error["message"] == "Request body exceeds 1048576 bytes."


def test_a_chunked_body_over_the_limit_is_refused_before_its_chunk_is_read(
    serve: Serve,
) -> None:
    port = serve()
    head = b"POST /configs HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
    # One chunk announced as 1 MiB + 1 byte, none of it sent.
    [response] = exchange(port, head + b"Transfer-Encoding: chunked\r\n\r\n100001\r\n")
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE")


# -- framing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: abc\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: +2\r\n",
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
        b"Content-Length: 2, 3\r\n",
        b"Content-Length : 2\r\n",  # whitespace before the colon: not a Content-Length
        b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n",
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Transfer-Encoding: identity\r\n",
    ],
)
def test_ambiguous_or_malformed_framing_is_a_400_envelope(serve: Serve, framing: bytes) -> None:
    port = serve()
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + framing + b"\r\n"
    [response] = exchange(port, request)  # the old server dropped the connection on "abc"
    assert_envelope(response, 400, "INVALID_REQUEST")


@pytest.mark.parametrize(
    "chunks",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # not hexadecimal
        b"0x2\r\n{}\r\n0\r\n\r\n",
        b"2\r\n{}XX0\r\n\r\n",  # the chunk's data is not followed by CRLF
        b"2\n{}\n0\n\n",  # bare LF
    ],
)
def test_a_malformed_chunked_body_is_a_400_envelope(serve: Serve, chunks: bytes) -> None:
    port = serve()
    head = b"POST /configs HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
    [response] = exchange(port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    assert_envelope(response, 400, "INVALID_REQUEST")


def test_a_chunked_body_reaches_the_route_and_the_next_request_follows_it(
    serve: Serve,
) -> None:
    port = serve()
    body = json.dumps({"name": "chunked", "values": {"a": 1}}).encode()
    first, rest = body[:10], body[10:]
    post = (
        b"POST /configs HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + f"{len(first):x}\r\n".encode()
        + first
        + f"\r\n{len(rest):X};ext=1\r\n".encode()  # upper-case hex, a chunk extension
        + rest
        + b"\r\n0\r\nX-Trailer: dropped\r\n\r\n"
    )
    get = b"GET /configs/chunked HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n"
    created, fetched = exchange(port, post + get)  # pipelined on one connection
    assert created[0] == 201, created
    assert fetched[0] == 200, fetched
    assert json.loads(fetched[2])["values"] == {"a": 1}


def test_a_request_with_a_valid_content_length_is_still_served(serve: Serve) -> None:
    port = serve()
    body = b'{"name": "plain", "values": {}}'
    post = (
        b"POST /configs HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
        b"Expect: 100-continue\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    responses = exchange(port, post)
    assert [status for status, _, _ in responses] == [100, 201]


# -- stalled clients and the thread bound --------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"POST /configs HTTP/1.1\r\nHost: x\r\n",  # stops in the middle of the headers
        b"POST /configs HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}",  # mid-body
        b"POST /configs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{",
    ],
)
def test_a_stalled_connection_is_closed_after_the_request_timeout(
    serve: Serve, sent: bytes
) -> None:
    port = serve(request_timeout=1.0)
    with connect(port) as sock:
        sock.sendall(sent)
        # recv returns b"" once the server closes; a server that never does lets the
        # socket's PATIENCE timeout fail the test (the old server kept it forever).
        assert read_to_close(sock) == b""


def test_a_client_trickling_bytes_is_closed_at_the_request_deadline(serve: Serve) -> None:
    """A byte every 0.1 s resets no per-read timer: the request as a whole has a deadline."""
    port = serve(request_timeout=1.0)
    with connect(port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nX-Drip: ")
        for _ in range(int(PATIENCE / 0.1)):
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                break
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                break  # closed between the select and the send
        else:
            pytest.fail("the server kept a trickling request open")
        assert read_to_close(sock) == b""


def handler_threads() -> int:
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def test_handler_threads_are_bounded_and_waiting_clients_are_served_later(
    serve: Serve,
) -> None:
    port = serve(request_timeout=1.0, max_threads=2)
    most = 0
    stalled = [connect(port) for _ in range(8)]
    try:
        answered: list[Response] = []

        def health() -> None:
            answered.extend(exchange(port, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"))

        client = threading.Thread(target=health)
        client.start()
        while client.is_alive():  # the stalled ones are dropped two at a time, then health
            most = max(most, handler_threads())
            client.join(0.005)
        most = max(most, handler_threads())
        assert [status for status, _, _ in answered] == [200]
        assert most <= 2, most  # the old server ran one thread per connection (9 here)
        for sock in stalled:  # each was dropped by the request timeout
            assert read_to_close(sock) == b""
    finally:
        for sock in stalled:
            sock.close()
