"""SSRF guard: refuse HTTP deliveries to addresses inside the service's own network.

Endpoints are registered by API clients, so a URL such as ``http://169.254.169.254/`` or a
DNS name that resolves to ``127.0.0.1`` would otherwise let them reach the metadata service
or internal hosts through the worker. Unless ``TE_ALLOW_PRIVATE_TARGETS=true``, the host
is resolved here, every address it resolves to must be public, and the dispatcher connects
to the checked address itself (so a second DNS answer cannot swap in a private one).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

#: Cloud metadata endpoints, refused even if a future Python stops calling them link-local.
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)


class BlockedTarget(Exception):
    """The target resolves to an address the guard refuses (message says which and why)."""


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` may not be a delivery target, or None if it is public."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refusal_reason(address.ipv4_mapped)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    checks = (
        ("is_loopback", "a loopback address"),
        ("is_unspecified", "the unspecified address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_reserved", "a reserved address"),
        ("is_private", "a private address"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if not address.is_global:
        return "not a globally routable address"
    return None


def resolve_public(host: str, port: int, resolver: Resolver = socket.getaddrinfo) -> str:
    """Resolve ``host`` and return one address to connect to, all of them being public.

    Raises :class:`BlockedTarget` if any address is refused (a name with one private
    answer among public ones is still a way in) or if the name does not resolve.
    """
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = resolver(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise BlockedTarget(f"target host {host!r} does not resolve ({exc})") from exc
        addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not addresses:
        raise BlockedTarget(f"target host {host!r} does not resolve")
    for address in addresses:
        reason = refusal_reason(address)
        if reason is not None:
            raise BlockedTarget(
                f"target {host!r} resolves to {address}, {reason}; private targets are "
                "refused (TE_ALLOW_PRIVATE_TARGETS is off)"
            )
    return str(addresses[0])


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
