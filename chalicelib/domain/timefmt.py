"""The one timestamp format of API responses: ISO 8601 in UTC with a ``Z`` suffix."""

from __future__ import annotations

import functools
from datetime import UTC, datetime


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
