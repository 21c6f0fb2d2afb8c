"""Kafka broker connections that obey the address policy (:mod:`chalicelib.worker.ssrf`).

A Kafka client connects to the bootstrap servers and then to every broker address the
cluster advertises in its metadata: a hostile cluster (or a hostile endpoint naming one)
could advertise ``10.0.0.5:9092`` or the metadata address. kafka-python opens every broker
connection through a ``KafkaNetSocket`` chosen by the ``proxy_url`` scheme (its extension
point for proxies); :func:`proxy_url` names a socket class whose ``dns_lookup`` resolves
through the policy and returns only checked addresses, which the client then connects to.
``kafka`` is imported on first use.
"""

from __future__ import annotations

import functools
import socket
import threading
from typing import Any

from chalicelib.worker.ssrf import (
    BlockedTarget,
    Resolver,
    public_addresses,
    refuse_secret_host,
)

SCHEME = "te-address-policy"

_lock = threading.Lock()
_resolvers: dict[str, Resolver] = {}


def proxy_url(resolver: Resolver) -> str:
    """The ``proxy_url`` that makes a kafka-python client check every broker address."""
    _policy_socket_class()  # registers the scheme with kafka-python
    key = str(id(resolver))
    with _lock:
        _resolvers[key] = resolver
    return f"{SCHEME}://{key}"


def check_bootstrap(servers: list[str], resolver: Resolver) -> None:
    """Refuse at once (:class:`BlockedTarget`) a bootstrap list with a refused address, or
    with a host holding a secret's value (checked first: the message names no server)."""
    refuse_secret_hosts(servers)
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host:
            host, port = server, "9092"
        try:
            number = int(port)
        except ValueError as exc:
            raise BlockedTarget(f"bootstrap server {server!r} has no numeric port") from exc
        public_addresses(host.strip("[]"), number, resolver)


def refuse_secret_hosts(servers: list[str]) -> None:
    """:class:`BlockedTarget` if a bootstrap server's host holds a secret's value (whether
    private targets are allowed or not: a secret never goes to a resolver)."""
    for server in servers:
        host = server.rpartition(":")[0] or server
        refuse_secret_host(host.strip("[]"))


@functools.cache
def _policy_socket_class() -> type:
    from kafka.errors import KafkaConnectionError
    from kafka.net.inet import KafkaNetSocket

    class PolicySocket(KafkaNetSocket):
        """Resolves broker names through the address policy; connects to checked ones."""

        SCHEMES = (SCHEME,)

        def __init__(self, proxy_url: str | None = None) -> None:
            key = (proxy_url or "").partition("://")[2]
            with _lock:
                self._resolver = _resolvers[key]

        def dns_lookup(self, host: str, port: int, raise_error: bool = False) -> list[Any]:
            try:
                found = public_addresses(host, port, self._resolver)
            except BlockedTarget as exc:
                raise KafkaConnectionError(str(exc)) from exc
            return [
                (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)
                for family, sockaddr in found
            ]

    return PolicySocket
