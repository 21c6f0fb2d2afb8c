"""The service clock: timezone-aware UTC "now", injected wherever time is read.

Services, scheduler loops and health stubs take a ``clock`` argument defaulting to
:func:`utcnow`, so tests move time instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

#: What every ``clock`` argument is: a function returning an aware UTC datetime.
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    """The current time in UTC (timezone-aware)."""
    return datetime.now(UTC)
