"""Failed key lookups are limited per client address and in total (``FailedAuthLimiter``):
past the limit a key the process does not know is refused with 429 before any lookup."""

from __future__ import annotations

import pytest

from chalicelib.api.auth import Authenticator, FailedAuthLimiter
from chalicelib.domain.api_keys import Scope, hash_key
from chalicelib.errors import RateLimited, Unauthorized
from tests.support.clock import FakeClock


def _authenticator(rate: float, total_rate: float) -> tuple[Authenticator, list[bytes], FakeClock]:
    clock = FakeClock(monotonic_start=1000.0)
    calls: list[bytes] = []
    valid = {hash_key("good"): Scope.READ}

    def lookup(digest: bytes) -> Scope | None:
        calls.append(digest)
        return valid.get(digest)

    limiter = FailedAuthLimiter(rate=rate, total_rate=total_rate, clock=clock.monotonic)
    return Authenticator(lookup=lookup, clock=clock.monotonic, failures=limiter), calls, clock


def _outcomes(auth: Authenticator, client: str, n: int) -> list[str]:
    seen = []
    for i in range(n):
        try:
            auth.authenticate(f"Bearer wrong-{client}-{i}", client)
            seen.append("ok")
        except Unauthorized:
            seen.append("401")
        except RateLimited as exc:
            assert exc.retry_after_sec >= 1
            seen.append("429")
    return seen


def test_a_client_past_its_failures_gets_429_without_a_lookup() -> None:
    auth, calls, clock = _authenticator(rate=2, total_rate=0)
    assert _outcomes(auth, "10.0.0.1", 10) == ["401"] * 4 + ["429"] * 6  # burst = 2x
    assert len(calls) == 4
    assert _outcomes(auth, "10.0.0.2", 1) == ["401"]  # another address has its own bucket
    clock.advance(seconds=0.5)  # one failure back
    assert _outcomes(auth, "10.0.0.1", 2) == ["401", "429"]


def test_the_total_limit_holds_across_addresses() -> None:
    auth, calls, _ = _authenticator(rate=100, total_rate=1)
    outcomes = [o for n in range(10) for o in _outcomes(auth, f"10.0.1.{n}", 1)]
    assert outcomes == ["401"] * 2 + ["429"] * 8
    assert len(calls) == 2


def test_a_known_key_is_not_refused_for_others_failures() -> None:
    auth, _, _ = _authenticator(rate=1, total_rate=1)
    assert auth.authenticate("Bearer good", "c").scope is Scope.READ  # cached now
    _outcomes(auth, "c", 5)
    assert auth.authenticate("Bearer good", "c").scope is Scope.READ


@pytest.mark.parametrize(("rate", "total_rate"), [(0, 0)])
def test_zero_turns_the_limits_off(rate: float, total_rate: float) -> None:
    auth, calls, _ = _authenticator(rate=rate, total_rate=total_rate)
    assert _outcomes(auth, "c", 50) == ["401"] * 50
    assert len(calls) == 50
