"""The address policy: which hosts a delivery may connect to, for every transport.

Endpoints are registered by API clients, so a URL such as ``http://169.254.169.254/``, a
``redis_url`` naming ``127.0.0.1`` or a Kafka broker that advertises ``10.0.0.5`` would
otherwise let them reach the metadata service or internal hosts through the worker.
Unless ``TE_ALLOW_PRIVATE_TARGETS=true``:

* the host is resolved here and every address it resolves to must be public (one private
  answer among public ones is still a way in);
* the transport connects to the checked address itself, so a second DNS answer cannot swap
  in a private one (HTTP: ``dispatchers/http.py``; Redis: :mod:`.redis_guard`; Kafka: every
  broker connection, bootstrap and advertised, goes through :mod:`.kafka_guard`);
* IPv6 forms that embed an IPv4 address (mapped, 6to4, NAT64, Teredo) are judged by the
  IPv4 address they carry;
* a refusal names the host the client gave, never the address it resolved to, and reads the
  same whether the name is private or does not resolve: the message reaches the API
  (attempt errors), and anything more would make the service an oracle for internal DNS;
* a host that holds a secret's value (:func:`refuse_secret_host`, whatever
  ``TE_ALLOW_PRIVATE_TARGETS`` says) is refused before any lookup and without being named:
  resolvers see and log the names they are asked. Endpoints cannot be written so any more;
  this covers rows stored before.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from chalicelib.domain.redaction import LIVE_SECRETS

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

#: Cloud metadata endpoints, refused even if a future Python stops calling them link-local.
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the last 32 bits are IPv4
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a local network's NAT64
SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated, still routed inside some sites

REFUSED = (
    "is not an allowed delivery target: it does not resolve, or it resolves to an address "
    "the policy refuses (private, loopback, link-local, metadata; TE_ALLOW_PRIVATE_TARGETS "
    "is off)"
)


class BlockedTarget(Exception):
    """The target is refused by the policy (the message never names a resolved address)."""


def refuse_secret_host(host: str) -> None:
    """Raise :class:`BlockedTarget` (naming nothing of it) if ``host`` holds the value of a
    secret this process has decrypted (:meth:`LiveSecrets.in_host
    <chalicelib.domain.redaction.LiveSecrets.in_host>`)."""
    if LIVE_SECRETS.in_host(host):
        raise BlockedTarget(
            "the target's host holds a secret's value: refused before any name lookup "
            "(a secret never goes to a resolver; put it in the user info, path, query or a "
            "header)"
        )


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` may not be a delivery target, or None if it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        reason = _ipv6_reason(address)
        if reason is not None:
            return reason or None  # "" means: judged public by the IPv4 it carries
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


def _ipv6_reason(address: ipaddress.IPv6Address) -> str | None:
    """A reason, "" for an embedding of a public IPv4, or None to apply the generic checks."""
    if address in SITE_LOCAL:
        return "a site-local address"
    if address in NAT64_LOCAL:
        return "a local NAT64 address"
    embedded: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        embedded.append(address.ipv4_mapped)
    elif address.sixtofour is not None:
        embedded.append(address.sixtofour)
    elif address in NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    elif address.teredo is not None:
        server, client = address.teredo
        for carried in (server, client):
            reason = refusal_reason(carried)
            if reason is not None:
                return f"{reason} (inside a Teredo address)"
        return None  # Teredo itself is then judged by the generic checks
    if not embedded:
        return None
    reason = refusal_reason(embedded[0])
    return "" if reason is None else f"{reason} (embedded in an IPv6 address)"


def resolve_public(host: str, port: int, resolver: Resolver = socket.getaddrinfo) -> str:
    """Resolve ``host`` and return one address to connect to, all of them being public.

    Raises :class:`BlockedTarget` if any address is refused or the name does not resolve.
    """
    return public_addresses(host, port, resolver)[0][1][0]


def public_addresses(
    host: str, port: int, resolver: Resolver = socket.getaddrinfo
) -> list[tuple[int, tuple[Any, ...]]]:
    """Every ``(family, sockaddr)`` ``host`` resolves to, once all are checked public."""
    refuse_secret_host(host)
    literal = _literal(host)
    if literal is not None:
        family = int(socket.AF_INET6 if literal.version == 6 else socket.AF_INET)
        sockaddr: tuple[Any, ...] = (str(literal), port)
        if literal.version == 6:
            sockaddr = (str(literal), port, 0, 0)
        found: list[tuple[int, tuple[Any, ...], IPAddress]] = [(family, sockaddr, literal)]
    else:
        found = _resolved(host, port, resolver)
    if not found:
        raise BlockedTarget(f"target host {host!r} {REFUSED}")
    for _, _, address in found:
        if refusal_reason(address) is not None:
            raise BlockedTarget(f"target host {host!r} {REFUSED}")
    return [(family, sockaddr) for family, sockaddr, _ in found]


def _resolved(
    host: str, port: int, resolver: Resolver
) -> list[tuple[int, tuple[Any, ...], IPAddress]]:
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        # The same words as a refusal: telling "no such name" from "private" apart would
        # show which internal names exist.
        raise BlockedTarget(f"target host {host!r} {REFUSED}") from exc
    found = []
    for family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        found.append((int(family), tuple(sockaddr), address))
    return found


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
