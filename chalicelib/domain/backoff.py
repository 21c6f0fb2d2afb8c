"""Retry decisions: the spec's ``compute_backoff`` with jitter, as a pure function.

Nothing here reads a clock or a global random generator: callers pass ``rand`` (a function
returning a float in ``[0, 1)``) and, for ``Retry-After`` dates, ``now``. Tests therefore
check exact delays without sleeping or patching.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

Rand = Callable[[], float]

#: Spec defaults of ``retry_policy`` (applied by the API; repeated here for old snapshots).
DEFAULT_MAX_ATTEMPTS = 1
DEFAULT_INITIAL_DELAY_MS = 1000
DEFAULT_MAX_DELAY_MS = 60000

#: The HTTP statuses whose ``Retry-After`` header overrides the computed backoff.
RETRY_AFTER_STATUSES = frozenset({429, 503})
#: Longest hold a target's ``Retry-After`` puts on its whole endpoint (one hour), so that a
#: target cannot stop an endpoint for ever; an operator's pause has no such bound.
MAX_ENDPOINT_HOLD_MS = 3_600_000


def endpoint_hold_ms(retry_after_ms: int | None) -> int | None:
    """How long a ``Retry-After`` holds the endpoint back (None: no hold)."""
    if retry_after_ms is None or retry_after_ms <= 0:
        return None
    return min(retry_after_ms, MAX_ENDPOINT_HOLD_MS)


class BackoffKind(StrEnum):
    """How the delay grows between attempts."""

    FIXED = "fixed"  #: always ``initial_delay_ms``
    LINEAR = "linear"  #: ``initial_delay_ms * attempt``
    EXPONENTIAL = "exponential"  #: ``initial_delay_ms * 2 ** (attempt - 1)``


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """An endpoint's retry policy (``max_attempts`` counts the first attempt)."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: BackoffKind = BackoffKind.EXPONENTIAL
    initial_delay_ms: int = DEFAULT_INITIAL_DELAY_MS
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    #: No retry is scheduled to start later than the first attempt's start plus this.
    max_retry_duration_ms: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RetryPolicy:
        """Build from the snapshot's ``retry_policy`` object, defaults for missing fields."""
        data = data or {}
        return cls(
            max_attempts=int(data.get("max_attempts", DEFAULT_MAX_ATTEMPTS)),
            backoff=BackoffKind(data.get("backoff", BackoffKind.EXPONENTIAL)),
            initial_delay_ms=int(data.get("initial_delay_ms", DEFAULT_INITIAL_DELAY_MS)),
            max_delay_ms=int(data.get("max_delay_ms", DEFAULT_MAX_DELAY_MS)),
            max_retry_duration_ms=_optional_int(data.get("max_retry_duration_ms")),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, kw_only=True)
class RetryDecision:
    """What to do after a failed attempt: retry after ``delay_ms``, or give up."""

    retry: bool
    delay_ms: int = 0
    reason: str = ""


def base_delay_ms(policy: RetryPolicy, attempt: int) -> int:
    """The un-jittered delay after attempt number ``attempt`` (1-based)."""
    attempt = max(1, attempt)
    if policy.backoff is BackoffKind.FIXED:
        return policy.initial_delay_ms
    if policy.backoff is BackoffKind.LINEAR:
        return policy.initial_delay_ms * attempt
    # Cap the exponent: past 2**40 every realistic max_delay_ms has long been reached.
    return policy.initial_delay_ms * 2 ** min(attempt - 1, 40)


def compute_backoff(policy: RetryPolicy, attempt: int, rand: Rand = random.random) -> int:
    """The spec's compute_backoff: base delay, +/-25 % jitter, clamped to [0, max_delay_ms]."""
    delay = base_delay_ms(policy, attempt)
    quarter = delay // 4
    # Uniform over [-quarter, +quarter]; spreads retries of executions that failed together.
    jitter = round((2 * rand() - 1) * quarter)
    return max(0, min(delay + jitter, policy.max_delay_ms))


def decide_retry(
    policy: RetryPolicy,
    attempt: int,
    *,
    retryable: bool = True,
    retry_after_ms: int | None = None,
    rand: Rand = random.random,
    elapsed_ms: int = 0,
) -> RetryDecision:
    """Retry or give up after attempt ``attempt`` failed.

    A non-retryable failure (template, SSRF, header injection) gives up at once. A
    ``Retry-After`` the target sent replaces the computed backoff, capped by max_delay_ms.
    ``elapsed_ms``: how long ago the first attempt started; with ``max_retry_duration_ms``
    a retry that would start later than that window's end is not scheduled.
    """
    if not retryable:
        return RetryDecision(retry=False, reason="not retryable")
    if attempt >= policy.max_attempts:
        return RetryDecision(retry=False, reason=f"{policy.max_attempts} attempts exhausted")
    if retry_after_ms is not None:
        delay, reason = max(0, min(retry_after_ms, policy.max_delay_ms)), "Retry-After"
    else:
        delay, reason = compute_backoff(policy, attempt, rand), str(policy.backoff)
    window = policy.max_retry_duration_ms
    if window is not None and elapsed_ms + delay > window:
        return RetryDecision(
            retry=False, reason=f"max_retry_duration_ms ({window} ms) would be passed"
        )
    return RetryDecision(retry=True, delay_ms=delay, reason=reason)


#: Digits of a delta-seconds Retry-After read (about 31 years); longer reads as the largest.
_RETRY_AFTER_DIGITS = 9


def parse_retry_after(value: str | None, now: datetime) -> int | None:
    """``Retry-After`` as milliseconds from ``now``: delta-seconds or an HTTP-date.

    Returns None when the header is missing or malformed (the computed backoff applies):
    delta-seconds are ASCII digits only (``str.isdigit`` also takes ``²``, which ``int``
    refuses), and more than :data:`_RETRY_AFTER_DIGITS` of them read as that many nines
    (``int`` of thousands of digits costs quadratic time, or raises; every caller caps
    the delay far below anyway).
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        digits = text.lstrip("0") or "0"
        if len(digits) > _RETRY_AFTER_DIGITS:
            digits = "9" * _RETRY_AFTER_DIGITS
        return int(digits) * 1000
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, OverflowError):  # a year or zone past C's integers
        return None
    if when.tzinfo is None:
        return None
    return max(0, int((when - now).total_seconds() * 1000))
