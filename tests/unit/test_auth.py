"""API key hashing, bearer parsing, the authenticator's cache and the rate limiter."""

from __future__ import annotations

import hashlib

import pytest

from chalicelib.api.auth import (
    CACHE_TTL_SEC,
    Authenticator,
    RateLimiter,
    bearer_token,
)
from chalicelib.domain.api_keys import generate_key, hash_key
from chalicelib.errors import RateLimited, Unauthorized


class FakeClock:
    """A clock the test moves by hand (time is injected, never slept)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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
    auth = Authenticator(lookup=lambda d: calls.append(d) or False, bootstrap_key="boot")
    assert auth.authenticate("Bearer boot") == hash_key("boot")
    assert calls == []
    with pytest.raises(Unauthorized, match="Invalid API key"):
        auth.authenticate("Bearer other")
    assert calls == [hash_key("other")]


def test_valid_keys_are_cached_for_the_ttl_and_invalid_ones_never() -> None:
    clock = FakeClock()
    valid = {hash_key("good")}
    calls: list[bytes] = []

    def lookup(digest: bytes) -> bool:
        calls.append(digest)
        return digest in valid

    auth = Authenticator(lookup=lookup, clock=clock)
    auth.authenticate("Bearer good")
    auth.authenticate("Bearer good")
    assert len(calls) == 1
    valid.clear()  # revoked
    clock.now += CACHE_TTL_SEC + 0.1
    with pytest.raises(Unauthorized):
        auth.authenticate("Bearer good")
    for _ in range(2):
        with pytest.raises(Unauthorized):
            auth.authenticate("Bearer bad")
    assert calls.count(hash_key("bad")) == 2


def test_rate_limiter_allows_a_burst_then_limits_then_refills() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rate=2, clock=clock)
    for _ in range(4):  # burst = 2 * rate
        limiter.check(b"k")
    with pytest.raises(RateLimited) as info:
        limiter.check(b"k")
    assert info.value.retry_after_sec == 1
    limiter.check(b"other")  # buckets are per key
    clock.now += 0.5  # one token back
    limiter.check(b"k")
    with pytest.raises(RateLimited):
        limiter.check(b"k")


def test_rate_limiter_disabled_at_zero() -> None:
    limiter = RateLimiter(rate=0)
    for _ in range(1000):
        limiter.check(b"k")


def test_retry_after_rounds_up_to_whole_seconds() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rate=0.1, clock=clock)
    with pytest.raises(RateLimited) as info:
        limiter.check(b"k")  # capacity 0.2 < 1 token: needs 8 s more
    assert info.value.retry_after_sec == 8
