"""SSRF guard: which addresses are refused, and names resolved through an injected resolver."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from chalicelib.worker.ssrf import BlockedTarget, refusal_reason, resolve_public


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "not a globally routable"),
        # IPv6 forms that carry an IPv4 address are judged by that address.
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
        ("2002:a9fe:a9fe::1", "metadata"),  # 6to4 of 169.254.169.254
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("64:ff9b:1::a00:1", "local NAT64"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1
        ("2001:0:a00:1::1", "private"),  # Teredo, server 10.0.0.1
        ("fec0::1", "site-local"),
        ("fec0:1::abcd", "site-local"),
    ],
)
def test_refused_addresses(address: str, reason: str) -> None:
    found = refusal_reason(ipaddress.ip_address(address))
    assert found is not None and reason in found


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "2606:4700::1111",
        "8.8.8.8",
        "2002:808:808::1",  # 6to4 of a public address
        "64:ff9b::808:808",  # NAT64 of a public address (what DNS64 hands an IPv6-only host)
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None


def _resolver(*addresses: str):
    def resolve(host: str, port: int, **_: object) -> list[tuple[object, ...]]:
        family = socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    return resolve


def test_name_resolving_to_loopback_is_refused_without_naming_the_address() -> None:
    with pytest.raises(BlockedTarget, match="not an allowed delivery target") as raised:
        resolve_public("internal.example", 80, resolver=_resolver("127.0.0.1"))
    assert "127.0.0.1" not in str(raised.value) and "loopback address" not in str(raised.value)
    assert "'internal.example'" in str(raised.value)


def test_one_private_answer_among_public_ones_is_refused() -> None:
    with pytest.raises(BlockedTarget) as raised:
        resolve_public("mixed.example", 80, resolver=_resolver("8.8.8.8", "10.0.0.5"))
    assert "10.0.0.5" not in str(raised.value)


def test_public_name_returns_the_checked_address() -> None:
    assert resolve_public("public.example", 443, resolver=_resolver("8.8.4.4")) == "8.8.4.4"


def test_literals_and_localhost_with_the_real_resolver() -> None:
    for host in ("127.0.0.1", "[::1]", "::1", "localhost", "169.254.169.254"):
        with pytest.raises(BlockedTarget):
            resolve_public(host, 80)


def test_unresolvable_name_is_refused() -> None:
    def fail(*_: object, **__: object) -> list[tuple[object, ...]]:
        raise socket.gaierror("Name or service not known")

    with pytest.raises(BlockedTarget, match="does not resolve, or it resolves to"):
        resolve_public("nowhere.invalid", 80, resolver=fail)
