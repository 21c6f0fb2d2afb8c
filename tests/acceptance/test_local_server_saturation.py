"""The local API server (make run) stays answerable while clients try to hold every handler
thread: 70 long-polls from one key and 200 slow clients (connected, sending their headers
a byte at a time) are open, and ``GET /health`` still answers. Long-polls past their share
of the handlers answer at once, without ``Preference-Applied`` (RFC 7240 lets a server
ignore a preference)."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.environment import BOOTSTRAP_KEY
from tests.support.served import free_port

LONG_POLLS = 70
SLOW_CLIENTS = 200
#: Long-polls that may wait at once: a quarter of the 64 handlers
#: (chalicelib.local.server.LONG_POLL_SHARE of chalicelib.local.http.MAX_HANDLER_THREADS).
LONG_POLL_CAP = 16
#: A socket timeout only: how long the test waits for an answer before calling it lost.
PATIENCE = 5.0


@pytest.fixture
def port(chalice_app: Any) -> Iterator[int]:
    """The local API server with its defaults (as ``make run`` starts it)."""
    from chalicelib.local.server import make_api_server

    chosen = free_port()
    server = make_api_server(chalice_app, "127.0.0.1", chosen)
    threading.Thread(target=server.server.serve_forever, daemon=True).start()
    yield chosen
    server.shutdown()
    server.server.server_close()


def _request(method: str, path: str, body: Any = None, **headers: str) -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", "Host: x", f"Authorization: Bearer {BOOTSTRAP_KEY}"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    lines += ["Content-Type: application/json", f"Content-Length: {len(data)}", "", ""]
    return "\r\n".join(lines).encode() + data


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (framed by Content-Length) read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before an answer")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(status_line.split()[1]), headers, rest[:length]


def _ask(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(request)
        return _answer(sock)


def _queued_execution(port: int) -> str:
    """An execution that stays QUEUED (no worker runs here): a long-poll on it waits."""
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    endpoint = {"name": "held", "type": "HTTP", "spec": spec}
    assert _ask(port, _request("POST", "/endpoints", endpoint))[0] == 201
    status, _, body = _ask(
        port,
        _request(
            "POST", "/jobs", {"endpoint": "held", "trigger": "IMMEDIATE", "idempotency_key": "h"}
        ),
    )
    assert status == 201, body
    return str(json.loads(body)["execution"]["execution_id"])


def _open(port: int, sent: bytes) -> socket.socket | None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
    except OSError:
        return None  # the backlog is full: a server that holds every thread
    try:
        sock.sendall(sent)
    except OSError:
        sock.close()
        return None
    return sock


def _answered(socks: list[socket.socket], until: float) -> list[socket.socket]:
    """The sockets with something to read before ``until`` (monotonic)."""
    ready: set[socket.socket] = set()
    while len(ready) < len(socks) and (left := until - time.monotonic()) > 0:
        readable, _, _ = select.select([s for s in socks if s not in ready], [], [], left)
        ready.update(readable)
    return list(ready)


def test_health_answers_while_long_polls_and_slow_clients_are_open(port: int) -> None:
    execution = _queued_execution(port)
    held: list[socket.socket] = []
    try:
        wait = _request("GET", f"/executions/{execution}", Prefer="wait=25")
        polls = [s for s in (_open(port, wait) for _ in range(LONG_POLLS)) if s]
        held += polls
        slow = [_open(port, b"GET /health HTTP/1.1\r\nX-Slow: ") for _ in range(SLOW_CLIENTS)]
        held += [s for s in slow if s]
        for sock in held[len(polls) :]:  # one more byte each: they are still sending
            with contextlib.suppress(OSError):
                sock.sendall(b"a")
        status, _, body = _ask(port, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert status == 200, body
        # Past the long-poll caps the rest were answered without waiting.
        cap = LONG_POLL_CAP
        answered = _answered(polls, time.monotonic() + PATIENCE)
        assert len(polls) == LONG_POLLS
        assert len(answered) >= LONG_POLLS - cap
        for sock in answered:
            status, headers, _ = _answer(sock)
            assert status == 200
            assert "preference-applied" not in headers
    finally:
        for sock in held:
            sock.close()
