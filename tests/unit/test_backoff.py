"""Backoff and retry decisions: pure, exact, no clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.domain.backoff import (
    BackoffKind,
    RetryPolicy,
    compute_backoff,
    decide_retry,
    parse_retry_after,
)

NO_JITTER = 0.5  # rand() = 0.5 puts the jitter at exactly 0


def policy(
    kind: str, initial: int = 1000, max_delay: int = 60000, attempts: int = 5
) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=attempts,
        backoff=BackoffKind(kind),
        initial_delay_ms=initial,
        max_delay_ms=max_delay,
    )


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("fixed", [1000, 1000, 1000, 1000]),
        ("linear", [1000, 2000, 3000, 4000]),
        ("exponential", [1000, 2000, 4000, 8000]),
    ],
)
def test_base_delays_per_kind(kind: str, expected: list[int]) -> None:
    got = [compute_backoff(policy(kind), n, lambda: NO_JITTER) for n in (1, 2, 3, 4)]
    assert got == expected


def test_jitter_spans_plus_minus_a_quarter() -> None:
    p = policy("fixed", initial=1000)
    assert compute_backoff(p, 1, lambda: 0.0) == 750
    assert compute_backoff(p, 1, lambda: 0.999999) == 1250


def test_clamped_to_max_delay_even_with_jitter() -> None:
    p = policy("exponential", initial=1000, max_delay=30000)
    assert compute_backoff(p, 10, lambda: 0.999999) == 30000
    assert compute_backoff(p, 200, lambda: 0.0) == 30000  # huge exponents do not overflow


def test_zero_delay_stays_zero() -> None:
    assert compute_backoff(policy("exponential", initial=0), 3, lambda: 0.0) == 0


def test_decision_retries_until_attempts_exhausted() -> None:
    p = policy("linear", initial=100, attempts=3)
    first = decide_retry(p, 1, rand=lambda: NO_JITTER)
    assert first.retry and first.delay_ms == 100
    assert decide_retry(p, 2, rand=lambda: NO_JITTER).delay_ms == 200
    last = decide_retry(p, 3, rand=lambda: NO_JITTER)
    assert not last.retry and "3 attempts exhausted" in last.reason


def test_non_retryable_gives_up_at_once() -> None:
    decision = decide_retry(policy("fixed"), 1, retryable=False)
    assert not decision.retry and decision.reason == "not retryable"


def test_retry_after_overrides_backoff_capped_by_max_delay() -> None:
    p = policy("exponential", initial=100, max_delay=5000)
    assert decide_retry(p, 1, retry_after_ms=3000).delay_ms == 3000
    assert decide_retry(p, 1, retry_after_ms=120000).delay_ms == 5000


def test_parse_retry_after_seconds_and_http_date() -> None:
    now = datetime(2026, 3, 15, 10, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7000
    assert parse_retry_after("Sun, 15 Mar 2026 10:00:30 GMT", now) == 30000
    assert parse_retry_after("Sun, 15 Mar 2026 09:00:00 GMT", now) == 0  # in the past
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_policy_from_snapshot_applies_spec_defaults() -> None:
    assert RetryPolicy.from_json(None) == RetryPolicy(
        max_attempts=1, backoff=BackoffKind.EXPONENTIAL, initial_delay_ms=1000, max_delay_ms=60000
    )
