"""Forward proxies from the environment, read as curl and requests read them.

``HTTP_PROXY`` / ``HTTPS_PROXY`` (either case; ``ALL_PROXY`` as the fallback) name an
``http://[user:password@]host:port`` proxy per target scheme; ``NO_PROXY`` lists hosts that
bypass it: ``*``, a name that also matches its subdomains (a leading dot is optional), an IP
address, an IP network in CIDR form, each optionally with ``:port``. These are the standard
variables every HTTP client honours, read once when the HTTP dispatcher is built (the
``TE_*`` settings stay :mod:`chalicelib.settings`' alone). ``urllib.request`` reads the
variables and drops ``HTTP_PROXY`` inside a CGI request (httpoxy).

How the request travels is :mod:`.wire`'s part: an ``https`` target through a ``CONNECT``
tunnel (TLS end to end, the certificate checked against the target's name), an ``http``
target as an absolute-form request to the proxy.
"""

from __future__ import annotations

import base64
import ipaddress
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from chalicelib.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy; ``authorization`` (from its URL's credentials) never shows in a repr."""

    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)


def proxies_from_environment() -> dict[str, str]:
    """``{"http": url, "https": url, "all": url, "no": list}`` from the process environment."""
    return urllib.request.getproxies_environment()


class ProxyConfig:
    """Which proxy, if any, a target goes through."""

    def __init__(self, proxies: Mapping[str, str]) -> None:
        fallback = proxies.get("all")
        self._by_scheme = {
            scheme: parse_proxy(url)
            for scheme in ("http", "https")
            if (url := proxies.get(scheme) or fallback)
        }
        self._no_proxy = [e.strip().lower() for e in proxies.get("no", "").split(",")]
        self._no_proxy = [entry for entry in self._no_proxy if entry]

    def for_target(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for ``scheme://host:port``, or None (none set, or NO_PROXY matches)."""
        proxy = self._by_scheme.get(scheme)
        if proxy is None or any(_bypasses(entry, host.lower(), port) for entry in self._no_proxy):
            return None
        return proxy


def parse_proxy(url: str) -> Proxy:
    """An ``http://`` proxy URL (a bare ``host:port`` means http); anything else is refused."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ConfigurationError("the proxy URL in the environment has an invalid port") from exc
    if parts.scheme != "http" or not parts.hostname:
        # Never quote the URL: it may carry credentials.
        raise ConfigurationError(
            "HTTP(S)_PROXY must be an http://host:port URL (TLS to the proxy is not supported)"
        )
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(parts.hostname, port, authorization)


def _bypasses(entry: str, host: str, port: int) -> bool:
    """Whether one NO_PROXY entry covers ``host:port`` (``host`` lower-cased, no brackets)."""
    if entry == "*":
        return True
    name, entry_port = _split_port(entry)
    if entry_port is not None and entry_port != port:
        return False
    if "/" in name:
        return _in_network(name, host)
    name = name.lstrip(".")
    return host == name or host.endswith("." + name)


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port or [v6]
        address, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return address, int(port) if port.isdigit() else None
    if entry.count(":") == 1:  # name:port or v4:port (a bare IPv6 has several colons)
        name, _, port = entry.partition(":")
        return name, int(port) if port.isdigit() else None
    return entry, None


def _in_network(cidr: str, host: str) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(cidr, strict=False)
    except ValueError:  # host is a name, or the entry is not a network
        return False
