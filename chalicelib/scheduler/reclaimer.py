"""Loop 3: the stuck execution reclaimer.

Every ``TE_RECLAIM_INTERVAL_SEC`` it returns RUNNING executions whose lease expired (started
more than ``TE_STUCK_EXECUTION_TIMEOUT_SEC`` ago: the worker crashed, was killed, or its
Lambda timed out) to RETRYING with ``run_at = now`` when attempts are left, else to FAILED
with ``completed_at = now``. Each one gets, in the same statement, a FAILED attempt record
for the lost attempt (error type ``WORKER_LOST``, unless the worker recorded that attempt
before dying) and a WARN log row. Safe with several schedulers: the UPDATE re-checks that
the execution is still RUNNING on an expired lease (``scheduler_reclaim_stuck``).

No row can stop it: when the batch statement (or what follows it: callbacks, batch
completion) fails in a way a row can cause (:func:`~chalicelib.db.faults.is_row_fault`),
the expired executions are reclaimed one by one
(``scheduler_reclaim_candidates``, ``scheduler_reclaim_listed``), and one that fails on its
own is set aside: FAILED at once, with an ERROR log line and a FAILED attempt of type
``UNPROCESSABLE`` saying why (``scheduler_reclaim_set_aside``), so it shows in the
dead-letter view and leaves the reclaimer's scan. Any other failure (database away or
contended, a permission) fails the iteration instead; the loop retries after its back-off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.faults import is_row_fault
from chalicelib.db.queries import Query, queries, regional
from chalicelib.domain.clock import utcnow
from chalicelib.domain.loops import UNPROCESSABLE, fault_reason
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.domain.statuses import ExecutionStatus, sources_of
from chalicelib.logs import log_event
from chalicelib.runtime.loop import Progress
from chalicelib.services import callbacks, keys

log = logging.getLogger(__name__)

#: Executions reclaimed per statement.
DEFAULT_BATCH_SIZE = 100

#: Both outcomes must be reachable from the status being reclaimed (RUNNING).
RECLAIMABLE_STATUSES = sorted(
    set(sources_of(ExecutionStatus.RETRYING)) & set(sources_of(ExecutionStatus.FAILED))
)


@dataclass(frozen=True)
class Reclaimed:
    """One execution taken back from a lost worker."""

    execution_id: str
    status: ExecutionStatus  #: RETRYING or FAILED
    attempt_recorded: bool  #: False when the worker had already recorded the attempt


class StuckReclaimer:
    """RUNNING past the lease -> RETRYING/FAILED; one :meth:`run_once` per iteration."""

    def __init__(
        self,
        db: Database,
        *,
        timeout_sec: float,
        batch_size: int = DEFAULT_BATCH_SIZE,
        clock: Callable[[], datetime] = utcnow,
        regions: Callable[[], RegionFilter] = lambda: ALL_REGIONS,
    ) -> None:
        self._db = db
        self._timeout_sec = timeout_sec
        self._batch_size = batch_size
        self._clock = clock
        self._regions = regions

    def reclaim(self) -> list[Reclaimed]:
        """Reclaim up to ``batch_size`` expired executions as of now.

        If the batch statement fails in a way a row can cause, the candidates are reclaimed
        one by one and one that fails alone is set aside (FAILED, :meth:`set_aside`), so a
        row the statement cannot write never blocks the reclaims behind it.
        """
        sql, params = regional(queries["scheduler_reclaim_stuck"], self._regions())
        now = self._clock()
        try:
            return self._take(sql, now, batch=self._batch_size, **params)
        except Exception as exc:
            if not is_row_fault(exc):
                raise  # an outage, or the same for every row: the loop fails and reports
        return self._one_by_one(now)

    def _one_by_one(self, now: datetime) -> list[Reclaimed]:
        sql, params = regional(queries["scheduler_reclaim_candidates"], self._regions())
        rows = self._db.run(sql, **self._window(now), batch=self._batch_size, **params)
        reclaimed: list[Reclaimed] = []
        for row in rows:
            execution_id = row["execution_id"]
            try:
                reclaimed += self._take(
                    queries["scheduler_reclaim_listed"], now, ids=[execution_id]
                )
            except Exception as exc:
                if not is_row_fault(exc):
                    raise
                self.set_aside(execution_id, fault_reason(exc), now)
        return reclaimed

    def _window(self, now: datetime) -> dict[str, datetime]:
        return {"now": now, "cutoff": now - timedelta(seconds=self._timeout_sec)}

    def _take(self, sql: Query | str, now: datetime, **params: Any) -> list[Reclaimed]:
        def work(tx: Transaction) -> list[Reclaimed]:
            # READ COMMITTED, as the worker's finalize: one CAS statement (SKIP LOCKED, the
            # lease re-checked on the latest row version), then, for executions it FAILED,
            # their callbacks and batch completion with the protocol the finalize shares
            # (children written, batch row locked, counted afresh).
            tx.execute(queries["worker_read_committed"])
            rows = tx.run(
                sql,
                **self._window(now),
                timeout_sec=_format_seconds(self._timeout_sec),
                from_statuses=RECLAIMABLE_STATUSES,
                **params,
            )
            if rows:  # GET /metrics counts reclaims from this row (metrics.sql)
                tx.execute(
                    queries["metrics_record_event"], event="reclaimed", now=now, amount=len(rows)
                )
            ended = [r["execution_id"] for r in rows if r["callback"]]
            batches = [r["batch_id"] for r in rows if r["batch_id"]]
            if ended or batches:
                callbacks.follow_up(tx, execution_ids=ended, batch_ids=batches, now=now)
            keys.changed(tx, keys.keyed_ids(rows))  # a FAILED head releases its key
            return [
                Reclaimed(r["execution_id"], ExecutionStatus(r["status"]), r["attempt_recorded"])
                for r in rows
            ]

        return self._db.transaction(work, name="scheduler_reclaim_stuck")

    def set_aside(self, execution_id: str, reason: str, now: datetime) -> None:
        """FAILED at once, with a log line and an UNPROCESSABLE attempt saying why
        (``scheduler_reclaim_set_aside``); logged once, by the reclaimer that did it."""

        def work(tx: Transaction) -> list[Row]:
            rows = tx.run(
                queries["scheduler_reclaim_set_aside"],
                execution_id=execution_id,
                reason=reason,
                **self._window(now),
            )
            keys.changed(tx, keys.keyed_ids(rows))  # its key goes on
            return rows

        done = self._db.transaction(work, name="scheduler_reclaim_set_aside")
        if done:
            log_event(
                log,
                "execution_failed",
                logging.ERROR,
                execution_id=execution_id,
                error_type=UNPROCESSABLE,
                error=reason,
                count=1,
            )

    def run_once(self) -> Progress:
        reclaimed = self.reclaim()
        failed = sum(1 for r in reclaimed if r.status is ExecutionStatus.FAILED)
        for r in reclaimed:
            if r.status is ExecutionStatus.FAILED:
                # The same event the worker logs for a FAILED execution, so one metric filter
                # (infra: TaskExecutor/ExecutionsFailed, value $.count) counts both paths.
                log_event(
                    log,
                    "execution_failed",
                    logging.ERROR,
                    execution_id=r.execution_id,
                    error_type="WORKER_LOST",
                    count=1,
                )
        return Progress(
            len(reclaimed),
            len(reclaimed) >= self._batch_size,
            {"retrying": len(reclaimed) - failed, "failed": failed},
        )


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)
