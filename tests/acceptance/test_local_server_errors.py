"""The local server's own protocol errors use the error envelope and are never a 5xx."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.served import free_port


@pytest.fixture
def port(chalice_app: Any) -> Iterator[int]:
    from chalicelib.local.server import make_api_server

    chosen = free_port()
    server = make_api_server(chalice_app, "127.0.0.1", chosen)
    threading.Thread(target=server.server.serve_forever, daemon=True).start()
    yield chosen
    server.shutdown()


def _raw(port: int, request: bytes) -> tuple[int, dict[str, object]]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize(
    ("request_line", "status", "code"),
    [
        (b"TRACE /configs HTTP/1.1", 405, "METHOD_NOT_ALLOWED"),
        (b"BREW /configs HTTP/1.1", 405, "METHOD_NOT_ALLOWED"),
        (b"GET /configs HTTP/2.0", 400, "INVALID_REQUEST"),  # http.server says 505
        (b"GET /configs HTTP/1.1 extra", 400, "INVALID_REQUEST"),
    ],
)
def test_protocol_errors_are_enveloped_4xx(
    port: int, request_line: bytes, status: int, code: str
) -> None:
    got_status, body = _raw(port, request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert got_status == status
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == code and error["request_id"]
