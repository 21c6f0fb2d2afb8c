"""The one timestamp format of API responses (ISO 8601 in UTC with a ``Z`` suffix) and the
range of instants the service accepts.

Every instant a client can give (a body field, a query parameter, a cursor) must lie in
``[EARLIEST_INSTANT, LATEST_INSTANT)``; migration 010 holds the stored columns to the same
range with CHECK constraints. Python's ``datetime`` ends at 9999-12-31 in *local* time,
pg8000 cannot read a later year back as a datetime, and PostgreSQL and CockroachDB differ at
the far ends, so a value near those limits stops whatever renders it in a time zone ahead
of UTC or adds a delay to it. The upper bound leaves a year of room for that arithmetic
(cron ticks in any zone, backoff, leases); the lower one is the Unix epoch, before which
this service has no history and cron tick keys (epoch milliseconds) would go negative.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

#: The first instant the service accepts (inclusive).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
#: The first instant past the range the service accepts (exclusive).
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=UTC)


def in_range(moment: datetime) -> bool:
    """True when an aware ``moment`` lies in ``[EARLIEST_INSTANT, LATEST_INSTANT)``."""
    return EARLIEST_INSTANT <= moment < LATEST_INSTANT


@functools.lru_cache(maxsize=1024)
def iso(value: datetime | None) -> str | None:
    """``2026-03-15T10:00:00Z`` (microseconds kept when present); None stays None.

    Naive datetimes are rejected: every timestamp in this service is timezone-aware, and
    guessing a zone would silently shift times. Memoized: the views of one batch share a
    handful of timestamps (the creating statement's now()), rendered 2,000 times.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetime: timestamps must be timezone-aware")
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


#: A duration such as ``250ms``, ``90s``, ``1h30m`` or ``2d``: one or more integer-unit parts.
_DURATION = re.compile(r"(?:[0-9]{1,12}(?:ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: Longest duration text read (the value is echoed in errors).
MAX_DURATION_TEXT = 32


def parse_duration(text: str) -> timedelta:
    """A positive duration written as integer-unit parts (units ``ms``, ``s``, ``m``,
    ``h``, ``d``): ``"250ms"``, ``"90s"``, ``"1h30m"``, ``"2d"``. ValueError otherwise."""
    if not isinstance(text, str) or len(text) > MAX_DURATION_TEXT or not _DURATION.fullmatch(text):
        raise ValueError(f"not a duration such as '90s' or '1h30m': {text!r}")
    total = sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION_PART.findall(text))
    if total <= 0:
        raise ValueError(f"a duration must be positive: {text!r}")
    try:
        return timedelta(milliseconds=total)
    except OverflowError as exc:
        raise ValueError(f"duration too long: {text!r}") from exc
