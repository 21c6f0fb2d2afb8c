"""Proxies from the environment: which proxy a target uses, and NO_PROXY (no I/O)."""

from __future__ import annotations

import pytest

from chalicelib.errors import ConfigurationError
from chalicelib.worker.dispatchers.proxy import Proxy, ProxyConfig, parse_proxy


def test_a_proxy_per_scheme_with_all_proxy_as_the_fallback() -> None:
    config = ProxyConfig({"https": "http://tls-proxy:3128", "all": "http://any-proxy:8080"})

    assert config.for_target("https", "hooks.example.com", 443) == Proxy("tls-proxy", 3128)
    assert config.for_target("http", "hooks.example.com", 80) == Proxy("any-proxy", 8080)


def test_no_variables_means_no_proxy() -> None:
    assert ProxyConfig({}).for_target("https", "hooks.example.com", 443) is None


def test_a_bare_host_port_is_an_http_proxy_on_that_port() -> None:
    assert parse_proxy("proxy.internal:3128") == Proxy("proxy.internal", 3128)
    assert parse_proxy("http://proxy.internal") == Proxy("proxy.internal", 80)


def test_credentials_become_basic_authorization_and_never_show() -> None:
    proxy = parse_proxy("http://ops%40corp:p%3Ass@proxy.internal:3128")

    assert proxy.authorization == "Basic b3BzQGNvcnA6cDpzcw=="  # ops@corp:p:ss
    assert "Basic" not in repr(proxy) and "p:ss" not in repr(proxy)


@pytest.mark.parametrize("url", ["https://ops:s3cret@proxy:3128", "socks5://ops:s3cret@proxy:1080"])
def test_only_http_proxies_are_accepted_and_the_url_is_not_quoted(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_proxy(url)
    assert "s3cret" not in str(info.value)


def test_an_invalid_port_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="invalid port"):
        parse_proxy("http://proxy:99999")


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "bypassed"),
    [
        ("*", "anything.example", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "hooks.example.com", 443, True),
        (".example.com", "hooks.example.com", 443, True),
        (".example.com", "example.com", 443, True),
        ("example.com", "notexample.com", 443, False),
        ("example.com", "example.com.evil.test", 443, False),
        ("Example.COM", "hooks.example.com", 443, True),
        ("10.1.2.3", "10.1.2.3", 80, True),
        ("10.0.0.0/8", "10.20.30.40", 80, True),
        ("10.0.0.0/8", "11.0.0.1", 80, False),
        ("10.0.0.0/8", "ten.example", 80, False),
        ("::1", "::1", 80, True),
        ("[::1]:8080", "::1", 8080, True),
        ("[::1]:8080", "::1", 80, False),
        ("example.com:8443", "example.com", 8443, True),
        ("example.com:8443", "example.com", 443, False),
        (" a.test , , example.com ", "example.com", 443, True),
    ],
)
def test_no_proxy_entries(no_proxy: str, host: str, port: int, bypassed: bool) -> None:
    config = ProxyConfig(
        {"https": "http://proxy:3128", "http": "http://proxy:3128", "no": no_proxy}
    )

    proxy = config.for_target("https", host, port)

    assert (proxy is None) is bypassed


def test_a_malformed_proxy_variable_stops_the_dispatcher_from_being_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker with a proxy it cannot use fails at start, not on every attempt."""
    from datetime import UTC, datetime

    from chalicelib.worker.dispatchers.http import HttpDispatcher

    monkeypatch.setenv("HTTPS_PROXY", "socks5://ops:s3cret@proxy:1080")

    with pytest.raises(ConfigurationError, match="HTTP\\(S\\)_PROXY") as info:
        HttpDispatcher(allow_private=False, clock=lambda: datetime.now(UTC))
    assert "s3cret" not in str(info.value)
