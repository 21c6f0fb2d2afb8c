"""A forward HTTP proxy on loopback for the proxy tests: it records what it is asked.

``CONNECT host:port`` is answered ``HTTP/1.0 200`` (as many proxies do) and relayed byte
for byte; an absolute-form request is forwarded in origin form with ``Connection: close``
and its response relayed. Only loopback destinations are reached: anything else is
recorded and answered ``502`` without a connection (no test sends a packet outside
loopback), which is how the address-policy tests see what the proxy was asked for.
"""

from __future__ import annotations

import ipaddress
import selectors
import socket
import socketserver
import threading
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urlsplit

BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True)
class ProxyRequest:
    method: str
    target: str
    headers: dict[str, str]


class LoopbackProxy:
    """Start with ``LoopbackProxy()``; ``url`` goes into HTTP(S)_PROXY."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[ProxyRequest] = []
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, credentials: str = "") -> str:
        return f"http://{credentials}127.0.0.1:{self.port}"

    def record(self, request: ProxyRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def received(self) -> list[ProxyRequest]:
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(proxy: LoopbackProxy) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            method, target, headers = _read_head(self.rfile)
            proxy.record(ProxyRequest(method, target, headers))
            if method == "CONNECT":
                self._tunnel(target)
            else:
                self._forward(method, target, headers)

        def _tunnel(self, authority: str) -> None:
            host, _, port = authority.rpartition(":")
            if not _loopback(host.strip("[]")):
                self.wfile.write(BAD_GATEWAY)
                return
            with socket.create_connection((host.strip("[]"), int(port))) as upstream:
                self.wfile.write(b"HTTP/1.0 200 Connection established\r\n\r\n")
                _relay(self.connection, upstream)

        def _forward(self, method: str, target: str, headers: dict[str, str]) -> None:
            url = urlsplit(target)
            if url.hostname is None or not _loopback(url.hostname):
                self.wfile.write(BAD_GATEWAY)
                return
            body = self.rfile.read(int(headers.get("content-length") or 0))
            kept = {k: v for k, v in headers.items() if k not in ("proxy-authorization",)}
            kept["connection"] = "close"
            head = f"{method} {url.path or '/'} HTTP/1.1\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in kept.items()) + "\r\n"
            with socket.create_connection((url.hostname, url.port or 80)) as upstream:
                upstream.sendall(head.encode("latin-1") + body)
                _relay(self.connection, upstream)

    return Handler


def _read_head(rfile: BinaryIO) -> tuple[str, str, dict[str, str]]:
    method, target, _ = rfile.readline().decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (line := rfile.readline().decode("latin-1").rstrip("\r\n")) != "":
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until either side closes (or 10 s of silence)."""
    peers = {client: upstream, upstream: client}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            selector.register(sock, selectors.EVENT_READ)
        while events := selector.select(timeout=10):
            for key, _ in events:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = sock.recv(65536)
                if not data:
                    return
                peers[sock].sendall(data)
