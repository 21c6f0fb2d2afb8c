"""The one clock tests move by hand (:class:`FakeClock`): time is injected, never slept."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

#: Where a :class:`FakeClock`'s wall time starts unless told: a Monday, 09:00 UTC.
T0 = datetime(2026, 3, 16, 9, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when the test moves it; safe to use from several threads.

    One reading on two scales: ``clock()`` is the wall time (an aware datetime, ``start``
    at first), for what takes a ``utcnow``; :meth:`monotonic` is seconds
    (``monotonic_start`` at first), for what takes a ``monotonic`` or a float ``clock``.
    The test moves both with :meth:`advance`, :meth:`set` or :meth:`set_monotonic`; code
    under test that waits calls :meth:`sleep` (or :meth:`wait`, a loop's wait), which
    records the wait in :attr:`sleeps` and moves the clock by it, so it returns at once.
    """

    def __init__(self, start: datetime = T0, *, monotonic_start: float = 0.0) -> None:
        self._start = start
        self._origin = monotonic_start
        self._reading = monotonic_start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        with self._lock:
            return self._start + timedelta(seconds=self._reading - self._origin)

    def monotonic(self) -> float:
        with self._lock:
            return self._reading

    def set(self, moment: datetime) -> None:
        """Move (either way) to this wall time."""
        with self._lock:
            self._reading = self._origin + (moment - self._start).total_seconds()

    def set_monotonic(self, reading: float) -> None:
        """Move (either way) to this reading of :meth:`monotonic`."""
        with self._lock:
            self._reading = reading

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move on by ``seconds`` plus ``timedelta(**delta)``; returns the new wall time."""
        with self._lock:
            self._reading += seconds + timedelta(**delta).total_seconds()
        return self()

    def sleep(self, seconds: float) -> None:
        """What code under test calls to wait: recorded, and the clock moves on by it."""
        with self._lock:
            self.sleeps.append(seconds)
            self._reading += seconds

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """A loop's wait (``LoopClock.wait``): :meth:`sleep`, then whether to stop."""
        self.sleep(seconds)
        return stop.is_set()
