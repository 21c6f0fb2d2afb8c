"""Redis connections that obey the address policy (:mod:`chalicelib.worker.ssrf`).

redis-py resolves and connects inside ``Connection._connect``; the guarded classes below
resolve the host through the policy (every answer must be public), connect to the checked
address, and keep the name the client gave for TLS (SNI and certificate checks). A
``unix://`` URL reaches a socket on the worker's own machine: refused unless private
targets are allowed. ``redis`` is imported on first use.
"""

from __future__ import annotations

import functools
import socket
from typing import Any

from chalicelib.worker.ssrf import (
    BlockedTarget,
    Resolver,
    public_addresses,
    refuse_secret_host,
)


def connection_pool(url: str, *, allow_private: bool, resolver: Resolver, **options: Any) -> Any:
    """A redis-py pool for ``url`` whose connections are checked and pinned.

    Raises ``ValueError`` for a malformed URL and :class:`BlockedTarget` for a refused one
    (a host holding a secret's value is refused even when private targets are allowed).
    """
    from redis.connection import ConnectionPool, UnixDomainSocketConnection, parse_url

    parsed = parse_url(url)
    if parsed.get("host"):
        refuse_secret_host(str(parsed["host"]))  # private targets allowed or not
    if allow_private:
        return ConnectionPool.from_url(url, **options)
    base = parsed.get("connection_class")
    if base is not None and issubclass(base, UnixDomainSocketConnection):
        raise BlockedTarget(
            "redis_url names a Unix socket on the worker's machine; refused "
            "(TE_ALLOW_PRIVATE_TARGETS is off)"
        )
    return ConnectionPool.from_url(url, connection_class=_guarded(base, resolver), **options)


@functools.cache
def _guarded(base: type | None, resolver: Resolver) -> type:
    """``base`` (Connection or SSLConnection) with a policy-checked, pinned connect."""
    from redis.connection import Connection, SSLConnection

    base = base or Connection
    if issubclass(base, SSLConnection):

        def connect_tls(self: Any) -> Any:
            sock = _pinned_socket(self, resolver)
            try:
                return self._wrap_socket_with_ssl(sock)  # server_hostname: the given name
            except BaseException:
                sock.close()
                raise

        return type("GuardedSSLConnection", (base,), {"_connect": connect_tls})

    def connect(self: Any) -> Any:
        return _pinned_socket(self, resolver)

    return type("GuardedConnection", (base,), {"_connect": connect})


def _pinned_socket(conn: Any, resolver: Resolver) -> socket.socket:
    """A socket connected to a checked address of ``conn.host`` (redis-py's options kept)."""
    error: OSError | None = None
    for family, sockaddr in public_addresses(conn.host, int(conn.port), resolver):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if conn.socket_keepalive:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                for option, value in (conn.socket_keepalive_options or {}).items():
                    sock.setsockopt(socket.IPPROTO_TCP, option, value)
            sock.settimeout(conn.socket_connect_timeout)
            sock.connect(sockaddr)
            sock.settimeout(conn.socket_timeout)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"no address to connect to for {conn.host!r}")
