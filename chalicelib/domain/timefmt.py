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

Durations a client gives (a DELAYED job's ``delay``) are read by :func:`parse_duration`.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

from chalicelib.errors import ValidationFailed

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


#: Milliseconds per unit of a duration string, largest unit first: the order parts are given in.
DURATION_UNITS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
#: Longer than any duration that fits the range of instants (the value is echoed in errors).
_MAX_DURATION_TEXT = 64
#: One part: digits then a unit; "ms" before "m" so that "250ms" is not read as "250m" + "s".
_DURATION_PART = re.compile(r"([0-9]{1,12})(ms|d|h|m|s)")


def parse_duration(value: object, name: str) -> timedelta:
    """A positive duration written as parts ``<digits><unit>``, units ``d``, ``h``, ``m``,
    ``s`` and ``ms``, each at most once and largest first: ``"250ms"``, ``"90s"``,
    ``"15m"``, ``"1h30m"``, ``"2d"``. Anything else, zero, or a duration longer than the
    range of instants, is 400 INVALID_REQUEST naming the field ``name``.

    Pure and bounded: the text is at most 64 characters and read part by part in one pass.
    """
    if not isinstance(value, str) or not value or len(value) > _MAX_DURATION_TEXT:
        raise ValidationFailed(_duration_message(name, value))
    total, position, units = 0, 0, list(DURATION_UNITS)
    while position < len(value):
        part = _DURATION_PART.match(value, position)
        if part is None or part.group(2) not in units:
            raise ValidationFailed(_duration_message(name, value))
        units = units[units.index(part.group(2)) + 1 :]  # each unit once, largest first
        total += int(part.group(1)) * DURATION_UNITS[part.group(2)]
        position = part.end()
    if total <= 0:
        raise ValidationFailed(f"Field '{name}' must be a positive duration, got {value!r}.")
    if total >= _RANGE_MS:
        raise ValidationFailed(
            f"Field '{name}' is longer than the range of instants the service accepts."
        )
    return timedelta(milliseconds=total)


def format_duration(milliseconds: int) -> str:
    """A positive duration in milliseconds as ``parse_duration`` reads it, largest unit
    first and no zero parts: 5,400,000 is ``"1h30m"``, 250 is ``"250ms"``."""
    parts = []
    for unit, size in DURATION_UNITS.items():
        count, milliseconds = divmod(milliseconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0ms"


#: Milliseconds from the first to past the last accepted instant: no duration is longer.
_RANGE_MS = (LATEST_INSTANT - EARLIEST_INSTANT) // timedelta(milliseconds=1)


def _duration_message(name: str, value: object) -> str:
    shown = "a string that is not one" if isinstance(value, str) else "a non-string value"
    if isinstance(value, str) and len(value) <= _MAX_DURATION_TEXT:
        shown = repr(value)
    return (
        f"Field '{name}' must be a duration such as '250ms', '90s', '15m', '1h30m' or '2d' "
        f"(units d, h, m, s, ms, each at most once, largest first); got {shown}."
    )
