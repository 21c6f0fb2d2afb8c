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

The promoter also keeps what the claim reads to what it may take (migration 018): each
pass parks a page of the due rows of endpoints that are paused, flow-controlled or held for
longer than :data:`PARK_HOLDS_OVER` (``scheduler_park``), and unparks a page of those of
endpoints released since (``scheduler_unpark``), oldest first, so an idle claim costs the
same with or without a paused backlog. Parking never decides what may be claimed (the
claim checks the endpoint either way), only what the claim has to read; a released
endpoint's rows are back within a pass or two (:data:`PARK_PAGE` a pass, oldest first, so
its oldest work is claimable at once). And every :data:`LIVE_COUNTS_EVERY` it recounts the
waiting executions by endpoint and status into ``live_counts``, which GET /overview and
GET /metrics read instead of counting the backlog on every poll and scrape (the spec's
metrics reporter runs every 15 s too). Promoting, parking, unparking and counting each run
on their own, so one that fails does not keep the others from running; the pass then fails
with it and the loop backs off.
"""

from __future__ import annotations

import time
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

#: Executions parked, and unparked, per pass at most (each one statement).
PARK_PAGE = 2_000
#: A Retry-After hold shorter than this is over before parking its rows would pay.
PARK_HOLDS_OVER = timedelta(seconds=5)
#: How often the waiting executions are recounted into live_counts (seconds).
LIVE_COUNTS_EVERY = 15.0


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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if lookahead < timedelta(0):
            raise ValueError("lookahead must not be negative")
        self._db = db
        self._batch_size = batch_size
        self._lookahead = lookahead
        self._clock = clock
        self._regions = regions
        self._wakeup_notify = wakeup_notify
        self._monotonic = monotonic
        self._counted_at: float | None = None  #: monotonic time of the last live count

    def run_once(self) -> Progress:
        """Promote, park and unpark a page each, and recount the live work when due."""
        errors: list[Exception] = []

        def step(run: Callable[[], int]) -> int:
            try:
                return run()
            except Exception as exc:  # each step runs whatever the others did
                errors.append(exc)
                return 0

        promoted = step(self._promote)
        parked = step(lambda: self._page("scheduler_park", hold_ms=_ms(PARK_HOLDS_OVER)))
        unparked = step(lambda: self._page("scheduler_unpark"))
        counted = step(self._count_live)
        if errors:
            raise errors[0]
        return Progress(
            promoted,
            promoted >= self._batch_size or PARK_PAGE in (parked, unparked),
            {"parked": parked, "unparked": unparked, "live_counted": counted},
        )

    def _page(self, name: str, **params: int) -> int:
        return int(
            self._db.transaction(
                lambda tx: tx.scalar(queries[name], page=PARK_PAGE, **params), name=name
            )
        )

    def _count_live(self) -> int:
        """Replace live_counts when the last count is LIVE_COUNTS_EVERY old (1: counted)."""
        now = self._monotonic()
        if self._counted_at is not None and now - self._counted_at < LIVE_COUNTS_EVERY:
            return 0
        recount_live(self._db)
        self._counted_at = now
        return 1

    def _promote(self) -> int:
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

        return int(self._db.transaction(promote, name="scheduler_promote_due"))


def recount_live(db: Database) -> None:
    """Replace live_counts with the waiting executions counted now, in one transaction."""

    def count(tx: Transaction) -> None:
        tx.run(queries["scheduler_live_counts_clear"])
        tx.run(queries["scheduler_live_counts_write"])

    db.transaction(count, name="scheduler_live_counts")


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)
