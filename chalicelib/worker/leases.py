"""The lease keeper: a thread that renews the leases of what the worker holds.

Every held execution has a lease in the database (``executions.lease_expires_at``). Each
round asks the :class:`~chalicelib.worker.ledger.Ledger` which leases are due (a third of a
lease old: :data:`~chalicelib.worker.holdings.RENEW_SHARE`), renews them through the
worker's store (:meth:`~chalicelib.worker.store.WorkerStore.renew`: one statement),
and tells the ledger which were kept and which were lost to the reclaimer (those are not
sent).
"""

from __future__ import annotations

import logging
import threading

from chalicelib.errors import DatabaseError
from chalicelib.worker.holdings import RENEW_SHARE
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.store import WorkerStore

log = logging.getLogger("chalicelib.worker")


class LeaseKeeper:
    """A thread that renews the leases of what the ledger holds, one store call per round."""

    def __init__(self, store: WorkerStore, ledger: Ledger) -> None:
        self._store = store
        self._ledger = ledger
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        """Seconds between rounds: a fraction of the share of a lease that triggers one."""
        return max(0.05, self._ledger.lease_sec * RENEW_SHARE / 4)

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="te-leases", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def renew_once(self) -> list[str]:
        """One round; returns the executions found lost."""
        ids = self._ledger.due_for_renewal()
        if not ids:
            return []
        sent_at = self._ledger.clock()  # the clock the deadlines are kept on
        lost = self._ledger.renewed(ids, self._renew(ids), sent_at)
        if lost:
            log.warning("leases lost to the reclaimer; not sending %d executions", len(lost))
        return lost

    def _renew(self, ids: list[str]) -> set[str]:
        """The round's one renewal; returns the executions whose leases were kept."""
        return self._store.renew(ids, int(self._ledger.lease_sec * 1000))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.renew_once()
            except DatabaseError as exc:
                log.warning("lease renewal failed; retrying next round", exc_info=exc)
