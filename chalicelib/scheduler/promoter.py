"""Loop 2: the delayed promoter.

Every ``TE_PROMOTE_INTERVAL_MS`` it moves PENDING executions whose ``run_at`` has come to
QUEUED, where workers claim them, in bounded batches (a full batch runs again at once).
Each moved execution gets an INFO log row in the same statement. Safe with several
schedulers: the UPDATE re-checks the status, so the first one wins and the others find
nothing (``scheduler_promote_due``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.domain.statuses import ExecutionStatus, sources_of
from chalicelib.scheduler.loop import Progress
from chalicelib.scheduler.regional import regional
from chalicelib.wiring import utcnow

#: Executions promoted per statement: small enough to keep the transaction short.
DEFAULT_BATCH_SIZE = 500

PROMOTED_MESSAGE = "run_at reached; execution QUEUED."


class DelayedPromoter:
    """PENDING -> QUEUED when due; one :meth:`run_once` per loop iteration."""

    def __init__(
        self,
        db: Database,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        clock: Callable[[], datetime] = utcnow,
        regions: Callable[[], RegionFilter] = lambda: ALL_REGIONS,
    ) -> None:
        self._db = db
        self._batch_size = batch_size
        self._clock = clock
        self._regions = regions

    def run_once(self) -> Progress:
        """Promote up to ``batch_size`` due executions as of now."""
        sql, params = regional(queries["scheduler_promote_due"], self._regions())
        now = self._clock()
        promoted = self._db.transaction(
            lambda tx: int(
                tx.scalar(
                    sql,
                    now=now,
                    batch=self._batch_size,
                    from_statuses=sources_of(ExecutionStatus.QUEUED),
                    message=PROMOTED_MESSAGE,
                    **params,
                )
            ),
            name="scheduler_promote_due",
        )
        return Progress(promoted, promoted >= self._batch_size)
