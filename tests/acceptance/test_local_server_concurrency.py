"""The local API server (make run) under concurrent requests: no request sees another's body.

Chalice's threaded dev server needs the app's ``current_request`` to be thread-local; bench/
found replies carrying a neighbour's idempotency key when it was not.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

from tests.support.environment import BOOTSTRAP_KEY
from tests.support.served import free_port


def _post(port: int, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={
                "Authorization": f"Bearer {BOOTSTRAP_KEY}",
                "Content-Type": "application/json",
            },
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_concurrent_posts_each_get_their_own_reply(chalice_app: Any) -> None:
    from chalicelib.local.server import make_api_server

    port = free_port()
    server = make_api_server(chalice_app, "127.0.0.1", port)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        status, _ = _post(
            port,
            "/endpoints",
            {"name": "e", "type": "HTTP", "spec": {"url": "http://example.com/", "method": "POST"}},
        )
        assert status == 201
        replies: dict[str, tuple[int, Any]] = {}
        lock = threading.Lock()

        def client(worker: int) -> None:
            for n in range(25):
                key = f"k-{worker}-{n}"
                reply = _post(
                    port,
                    "/jobs",
                    {
                        "endpoint": "e",
                        "trigger": "IMMEDIATE",
                        "idempotency_key": key,
                        "input": {"n": key},
                    },
                )
                with lock:
                    replies[key] = reply

        clients = [threading.Thread(target=client, args=(w,)) for w in range(8)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
    finally:
        server.shutdown()
    assert len(replies) == 200
    mismatched = {
        key: body.get("idempotency_key")
        for key, (status, body) in replies.items()
        if status != 201 or body.get("idempotency_key") != key or body["input"] != {"n": key}
    }
    assert mismatched == {}


def test_a_burst_of_connections_is_queued_not_dropped(chalice_app: Any) -> None:
    """Before anything is accepted, 50 connections all complete their handshake (the accept
    backlog is 128; socketserver's default of 5 drops the rest, costing 1 s retransmits)."""
    from chalicelib.local.server import make_api_server

    port = free_port()
    server = make_api_server(chalice_app, "127.0.0.1", port)  # listening, not yet serving
    sockets = []
    try:
        for _ in range(50):
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
        assert len(sockets) == 50
    finally:
        for sock in sockets:
            sock.close()
        server.server.server_close()
