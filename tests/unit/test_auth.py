"""API key hashing, bearer parsing, scopes, the authenticator's cache and the rate limiter."""

from __future__ import annotations

import hashlib

import pytest

from chalicelib.api.auth import (
    CACHE_TTL_SEC,
    Authenticator,
    Principal,
    RateLimiter,
    authorize,
    bearer_token,
    required_scope,
)
from chalicelib.domain.api_keys import Scope, check_key_name, generate_key, hash_key, parse_scope
from chalicelib.errors import Forbidden, RateLimited, Unauthorized, ValidationFailed
from tests.support.clock import FakeClock


def test_keys_are_random_prefixed_and_hashed_with_sha256() -> None:
    key = generate_key()
    assert key.startswith("te_") and len(key) > 40
    assert key != generate_key()
    assert hash_key(key) == hashlib.sha256(key.encode()).digest()
    assert len(hash_key(key)) == 32


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer   ", "Basic abc", "Token abc", "bearer"]
)
def test_bad_authorization_headers_are_unauthorized(header: str | None) -> None:
    with pytest.raises(Unauthorized):
        bearer_token(header)


def test_bearer_token_is_case_insensitive_on_the_scheme() -> None:
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Bearer abc") == "abc"


def test_bootstrap_key_is_accepted_without_a_lookup() -> None:
    calls: list[bytes] = []
    auth = Authenticator(lookup=lambda d: calls.append(d) or None, bootstrap_key="boot")
    assert auth.authenticate("Bearer boot") == Principal(hash_key("boot"), Scope.ADMIN)
    assert calls == []
    with pytest.raises(Unauthorized, match="Invalid API key"):
        auth.authenticate("Bearer other")
    assert calls == [hash_key("other")]


def test_valid_keys_are_cached_for_the_ttl_and_invalid_ones_never() -> None:
    clock = FakeClock(monotonic_start=1000.0)
    valid = {hash_key("good"): Scope.WRITE}
    calls: list[bytes] = []

    def lookup(digest: bytes) -> Scope | None:
        calls.append(digest)
        return valid.get(digest)

    auth = Authenticator(lookup=lookup, clock=clock.monotonic)
    assert auth.authenticate("Bearer good").scope is Scope.WRITE
    assert auth.authenticate("Bearer good").scope is Scope.WRITE  # from the cache
    assert len(calls) == 1
    valid.clear()  # revoked
    clock.advance(seconds=CACHE_TTL_SEC + 0.1)
    with pytest.raises(Unauthorized):
        auth.authenticate("Bearer good")
    for _ in range(2):
        with pytest.raises(Unauthorized):
            auth.authenticate("Bearer bad")
    assert calls.count(hash_key("bad")) == 2


def test_rate_limiter_allows_a_burst_then_limits_then_refills() -> None:
    clock = FakeClock(monotonic_start=1000.0)
    limiter = RateLimiter(rate=2, clock=clock.monotonic)
    for _ in range(4):  # burst = 2 * rate
        limiter.check(b"k")
    with pytest.raises(RateLimited) as info:
        limiter.check(b"k")
    assert info.value.retry_after_sec == 1
    limiter.check(b"other")  # buckets are per key
    clock.advance(seconds=0.5)  # one token back
    limiter.check(b"k")
    with pytest.raises(RateLimited):
        limiter.check(b"k")


def test_rate_limiter_disabled_at_zero() -> None:
    limiter = RateLimiter(rate=0)
    for _ in range(1000):
        limiter.check(b"k")


def test_retry_after_rounds_up_to_whole_seconds() -> None:
    clock = FakeClock(monotonic_start=1000.0)
    limiter = RateLimiter(rate=0.1, clock=clock.monotonic)
    with pytest.raises(RateLimited) as info:
        limiter.check(b"k")  # capacity 0.2 < 1 token: needs 8 s more
    assert info.value.retry_after_sec == 8


@pytest.mark.parametrize(
    ("method", "path", "needed"),
    [
        ("GET", "/jobs", Scope.READ),
        ("GET", "/metrics", Scope.READ),
        ("get", "/jobs/{job_id}", Scope.READ),
        ("POST", "/jobs", Scope.WRITE),
        ("PUT", "/jobs/{job_id}", Scope.WRITE),
        ("DELETE", "/configs/{name}", Scope.WRITE),
        ("PATCH", "/configs", Scope.WRITE),
        ("GET", "/keys", Scope.ADMIN),
        ("POST", "/keys", Scope.ADMIN),
        ("POST", "/keys/{key_id}/revoke", Scope.ADMIN),
        ("GET", "/keysmith", Scope.READ),  # only /keys and below are key administration
    ],
)
def test_the_method_decides_the_scope_and_key_routes_need_admin(
    method: str, path: str, needed: Scope
) -> None:
    assert required_scope(method, path) is needed


def test_each_scope_allows_its_routes_and_refuses_the_others_with_403() -> None:
    read, write, admin = (
        Principal(b"k", scope) for scope in (Scope.READ, Scope.WRITE, Scope.ADMIN)
    )
    authorize(read, "GET", "/jobs")
    with pytest.raises(Forbidden, match=r"'read'.*POST /jobs needs a 'write' key") as info:
        authorize(read, "POST", "/jobs")
    assert (info.value.status, info.value.code) == (403, "INSUFFICIENT_SCOPE")
    authorize(write, "POST", "/jobs")
    with pytest.raises(Forbidden, match="needs a 'admin' key"):
        authorize(write, "GET", "/keys")
    for method, path in (("GET", "/keys"), ("POST", "/keys"), ("DELETE", "/configs/{name}")):
        authorize(admin, method, path)


def test_a_cached_key_keeps_its_scope_and_the_lookup_decides_it() -> None:
    auth = Authenticator(lookup=lambda d: Scope.READ, cache_ttl_sec=0)
    assert auth.authenticate("Bearer any").scope is Scope.READ


@pytest.mark.parametrize("value", [None, "", "ADMIN", "root", 1, ["read"]])
def test_unknown_scopes_are_a_400(value: object) -> None:
    with pytest.raises(ValidationFailed, match=r"one of: read, write, admin\."):
        parse_scope(value)


@pytest.mark.parametrize("value", [None, "", "   ", "x" * 101, "a\x00b", "tab\there", 7])
def test_bad_key_names_are_a_400(value: object) -> None:
    with pytest.raises(ValidationFailed):
        check_key_name(value)
