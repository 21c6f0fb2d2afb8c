"""How an idle worker waits: the poll interval, unless something says work is there.

The claimer sleeps ``TE_WORKER_POLL_INTERVAL_MS`` only when a claim found nothing due. Two
accelerators end that sleep early: :meth:`IdleWait.wake` (in-process: the local stack's
nudge, a delivery of an endpoint at its share ending) and a PostgreSQL LISTEN connection
(:class:`chalicelib.db.notify.Listener`, on unless ``TE_WAKEUP_NOTIFY`` or CockroachDB says
otherwise). Polling stays the correct fallback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.db import notify
from chalicelib.db.connection import Database
from chalicelib.errors import DatabaseError

log = logging.getLogger("chalicelib.worker")


@dataclass
class SleepStats:
    """How idle sleeps ended (diagnostics; tests tell a wake-up from a timed-out poll)."""

    started: int = 0
    woken: int = 0  #: ended early by a nudge or a notification
    timed_out: int = 0  #: ran the whole poll interval


class IdleWait:
    """The idle sleep, what ends it early, and how the sleeps ended."""

    def __init__(self, db: Database | None, wakeup_notify: str) -> None:
        """``db``: the pool a LISTEN connection is opened from (None: polling only)."""
        self._db = db
        self._wakeup_notify = wakeup_notify
        self._wake = threading.Event()
        self.stats = SleepStats()
        #: The running LISTEN connection's thread, if any (tests inspect it).
        self.listener: notify.Listener | None = None

    def wake(self) -> None:
        """End the current (or the next) idle sleep at once."""
        self._wake.set()

    def sleep(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds unless woken first."""
        self.stats.started += 1
        if self._wake.wait(timeout):
            self.stats.woken += 1
        else:
            self.stats.timed_out += 1
        self._wake.clear()

    def listen(self, notified: Callable[[], None]) -> notify.Listener | None:
        """LISTEN for queued executions (PostgreSQL): each notification calls ``notified``
        (the worker's nudge, which ends this idle sleep).

        An accelerator: if the database cannot tell its flavor now, the worker polls only.
        """
        if self._db is None:
            return None
        try:
            if not notify.enabled(self._db, self._wakeup_notify):
                return None
        except DatabaseError as exc:
            log.warning("cannot decide on LISTEN/NOTIFY; polling only", exc_info=exc)
            return None
        listener = notify.Listener(self._db.params, notified)
        listener.start()
        self.listener = listener
        return listener
