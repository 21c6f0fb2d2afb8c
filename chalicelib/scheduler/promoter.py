"""Loop 2: the delayed promoter.

Every ``TE_PROMOTE_INTERVAL_MS`` it moves PENDING executions to QUEUED, where workers claim
them, in bounded batches (a full batch runs again at once). Each moved execution gets an INFO
log row in the same statement. Safe with several schedulers: the UPDATE re-checks the status,
so the first one wins and the others find nothing (``scheduler_promote_due``).

Look-ahead: an execution is promoted once its ``run_at`` is within the next promote interval
(``lookahead``; the service passes ``TE_PROMOTE_INTERVAL_MS`` itself, there is no separate
setting), not only once it has come. Promoting early never delivers early, since the worker's
claim requires ``run_at <= now()``: the row waits in QUEUED and the worker's next poll (or
wake-up) at or after ``run_at`` claims it, instead of the row waiting up to a whole promote
interval for the iteration after ``run_at``. Cancelling still works on a QUEUED row.

After a batch is promoted, a NOTIFY (:mod:`chalicelib.db.notify`) is published in the same
transaction so listening workers wake up; polling remains the fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from chalicelib.db import notify
from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries, regional
from chalicelib.domain.clock import utcnow
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.domain.statuses import promotion_sources
from chalicelib.runtime.loop import Progress

#: Executions promoted per statement: small enough to keep the transaction short.
DEFAULT_BATCH_SIZE = 500

PROMOTED_MESSAGE = "run_at due within the promote interval; execution QUEUED."


class DelayedPromoter:
    """PENDING -> QUEUED when due within ``lookahead``; one :meth:`run_once` per iteration."""

    def __init__(
        self,
        db: Database,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        lookahead: timedelta = timedelta(0),
        clock: Callable[[], datetime] = utcnow,
        regions: Callable[[], RegionFilter] = lambda: ALL_REGIONS,
        wakeup_notify: str = notify.AUTO,
    ) -> None:
        if lookahead < timedelta(0):
            raise ValueError("lookahead must not be negative")
        self._db = db
        self._batch_size = batch_size
        self._lookahead = lookahead
        self._clock = clock
        self._regions = regions
        self._wakeup_notify = wakeup_notify

    def run_once(self) -> Progress:
        """Promote up to ``batch_size`` executions due before now plus the look-ahead."""
        sql, params = regional(queries["scheduler_promote_due"], self._regions())
        horizon = self._clock() + self._lookahead
        # Decided outside the transaction: the first call may read the server version.
        notifying = notify.enabled(self._db, self._wakeup_notify)

        def promote(tx: Transaction) -> int:
            promoted = int(
                tx.scalar(
                    sql,
                    horizon=horizon,
                    batch=self._batch_size,
                    from_statuses=promotion_sources(),
                    message=PROMOTED_MESSAGE,
                    **params,
                )
            )
            if promoted and notifying:
                notify.publish(tx, self._db, self._wakeup_notify)
            return promoted

        promoted = self._db.transaction(promote, name="scheduler_promote_due")
        return Progress(promoted, promoted >= self._batch_size)
