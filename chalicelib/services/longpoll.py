"""Long-polling (RFC 7240 ``Prefer: wait=N``) without holding a database connection.

The caller passes ``fetch``, which runs one short transaction and returns a snapshot, and
``done``, which says whether the snapshot is final. Between polls nothing is borrowed from
the pool: the connection goes back after every ``fetch`` and only then does the loop sleep.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

#: API Gateway gives up after 29 s; 25 s leaves room for the final read and the response.
MAX_WAIT_SECONDS = 25
POLL_INTERVAL_SECONDS = 0.15


def parse_prefer_wait(header: str | None) -> int | None:
    """The ``wait`` preference in seconds, capped at 25; None when absent or malformed.

    RFC 7240: preferences are comma-separated, parameters after ``;`` are ignored here, and
    a preference the server does not understand (``wait=soon``, ``wait=-1``) is ignored
    rather than rejected.
    """
    if not header:
        return None
    for preference in header.split(","):
        token = preference.split(";", 1)[0].strip()
        name, _, value = token.partition("=")
        if name.strip().lower() != "wait":
            continue
        value = value.strip().strip('"')
        if value.isdigit() and len(value) <= 6:
            return min(int(value), MAX_WAIT_SECONDS)
        return None
    return None


@dataclass(frozen=True)
class Poller:
    """Repeats a short read until it is final or the wait runs out (clock injected)."""

    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    interval: float = POLL_INTERVAL_SECONDS

    def wait(self, fetch: Callable[[], T], done: Callable[[T], bool], seconds: float) -> T:
        """The first final snapshot, or the last one read when ``seconds`` have passed."""
        deadline = self.monotonic() + seconds
        snapshot = fetch()
        while not done(snapshot):
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                break
            self.sleep(min(self.interval, remaining))
            snapshot = fetch()
        return snapshot


@dataclass
class WaitSlots:
    """How many long-polls may wait at once: ``total`` in all, ``per_key`` per API key.

    A server whose handler threads are few (the local server's) gives long-polls a share of
    them, so that waiting requests cannot take every thread. A request past either cap is
    answered at once, as if it had not asked to wait: RFC 7240 lets a server ignore a
    preference, and then it sends no ``Preference-Applied``.
    """

    total: int
    per_key: int
    _held: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def holding(self, key: str) -> Iterator[bool]:
        """Hold a slot for ``key`` while the block runs; yields whether one was free."""
        with self._lock:
            granted = self._held.total() < self.total and self._held[key] < self.per_key
            if granted:
                self._held[key] += 1
        try:
            yield granted
        finally:
            if granted:
                with self._lock:
                    self._held[key] -= 1
                    if not self._held[key]:
                        del self._held[key]
