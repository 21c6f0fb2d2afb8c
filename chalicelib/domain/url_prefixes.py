"""A job's own URL and the prefixes its HTTP endpoint allows (``spec.allowed_url_prefixes``).

Pure: the API checks a prefix when an endpoint is written and a job's ``url`` against its
endpoint's prefixes when the job is written; the worker checks the URL again at each
delivery, against the prefixes of the definition it delivers with, before the address
policy (:mod:`chalicelib.worker.ssrf`) judges the host's resolved addresses.

The match is on the parsed URL, never on its text: same scheme, same host (case-folded),
same port (the scheme's default when none is written) and a path that starts with the
prefix's path, which ends in ``/`` (so ``/hooks/`` never admits ``/hooks-admin``). Text a
parser could read two ways is refused before any match, so the URL the worker sends is the
one judged here: anything but printable ASCII, a backslash, user info (``@``), a fragment,
``.`` and ``..`` path segments (also percent-encoded) and percent-encoded slashes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from chalicelib.errors import InvalidTarget

#: Most prefixes one endpoint may list, and the longest prefix or job URL accepted.
MAX_PREFIXES = 32
MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]+")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)


@dataclass(frozen=True)
class Target:
    """A URL as the match reads it."""

    scheme: str
    host: str  #: case-folded
    port: int
    path: str
    query: bool  #: it carries a query (a prefix may not)


def parse_target(url: Any) -> Target | str:
    """The URL's parts, or what makes it unfit to be judged (a sentence fragment)."""
    problem = _text_problem(url)
    if problem:
        return problem
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        return "it must begin with http:// or https://"
    authority, slash, remainder = rest.partition("/")
    if "?" in authority:
        return "it must have a path (at least '/') after its host"
    if "@" in authority:
        return "it must not carry user info ('@')"
    host, port = _host_and_port(authority, scheme)
    if not host or port is None:
        return "it must name a host and, if any, a numeric port"
    path, question, _ = (slash + remainder).partition("?")
    problem = _path_problem(path)
    if problem:
        return problem
    return Target(scheme, host.casefold(), port, path, bool(question))


def _text_problem(url: Any) -> str | None:
    """What in the URL's text alone a parser could read two ways (or not at all)."""
    if not isinstance(url, str) or not url:
        return "it must be a non-empty string"
    if len(url) > MAX_URL_LENGTH:
        return f"it is longer than {MAX_URL_LENGTH} characters"
    if not _PRINTABLE_ASCII.fullmatch(url):
        return "it must be printable ASCII without spaces"
    if "\\" in url or "#" in url:
        return "it must not contain a backslash or a fragment"
    return None


def _host_and_port(authority: str, scheme: str) -> tuple[str, int | None]:
    if authority.startswith("["):  # an IPv6 literal
        host, _, after = authority.partition("]")
        host, port_text = host + "]", after.removeprefix(":") if after else ""
        if after and not after.startswith(":"):
            return "", None
    else:
        host, _, port_text = authority.partition(":")
    if not port_text:
        return host, _DEFAULT_PORTS[scheme]
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return host, None
    return host, int(port_text)


def _path_problem(path: str) -> str | None:
    if not path.startswith("/"):
        return "it must have a path (at least '/') after its host"
    if _ENCODED_SEPARATOR.search(path):
        return "its path must not hold percent-encoded slashes (%2F, %5C)"
    if any(unquote(segment) in (".", "..") for segment in path.split("/")):
        return "its path must not hold '.' or '..' segments"
    return None


def check_prefixes(where: str, value: Any) -> None:
    """``spec.allowed_url_prefixes``: a non-empty list of at most :data:`MAX_PREFIXES`
    absolute http(s) URLs with a host, each ending in ``/``, without query (422
    INVALID_TARGET naming the entry otherwise)."""
    if not isinstance(value, list) or not value or len(value) > MAX_PREFIXES:
        raise InvalidTarget(
            f"Field '{where}' must be a non-empty array of at most {MAX_PREFIXES} URL prefixes."
        )
    for index, prefix in enumerate(value):
        parsed = parse_target(prefix)
        if isinstance(parsed, Target) and (parsed.query or not parsed.path.endswith("/")):
            parsed = "it must end in '/' and carry no query"
        if isinstance(parsed, str):
            raise InvalidTarget(
                f"Field '{where}[{index}]' must be an absolute http(s) URL prefix: {parsed}."
            )


def url_problem(url: Any, prefixes: Sequence[Any] | None) -> str | None:
    """Why a job may not be delivered to ``url`` under these prefixes, or None."""
    if not prefixes:
        return "its endpoint allows no job URL (its spec has no allowed_url_prefixes)"
    target = parse_target(url)
    if isinstance(target, str):
        return target
    for prefix in prefixes:
        allowed = parse_target(prefix)
        if isinstance(allowed, Target) and _under(target, allowed):
            return None
    return "it matches none of its endpoint's allowed_url_prefixes"


def _under(target: Target, prefix: Target) -> bool:
    return (
        target.scheme == prefix.scheme
        and target.host == prefix.host
        and target.port == prefix.port
        and target.path.startswith(prefix.path)
    )


def check_job_url(url: Any, spec: Any) -> None:
    """422 INVALID_TARGET naming ``url`` unless ``spec`` (an endpoint's) allows it."""
    prefixes = spec.get("allowed_url_prefixes") if isinstance(spec, dict) else None
    problem = url_problem(url, prefixes)
    if problem:
        raise InvalidTarget(f"Field 'url' is not an allowed target: {problem}.")
