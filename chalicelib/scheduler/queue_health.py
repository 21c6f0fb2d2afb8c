"""The ``queue_health`` log event: the deployment's delivery figures, once a minute.

CloudWatch does not scrape GET /metrics; in AWS the alarms on queue lag and delivery
failure rate (``infra/stacks/observability.py``) read this event through metric filters
instead. The housekeeper logs it once a minute (it runs every minute in the
``reclaim_stuck_executions`` Lambda and in every long-lived scheduler) with:

``oldest_due_lag_seconds``
    how long the oldest due execution has waited past its run_at, paused endpoints left
    out: ``te_oldest_due_lag_seconds`` at the same instant (0 when nothing is due);
``minute``, ``attempts``, ``failed_attempts``
    the delivery attempts finished in the last complete minute (the one starting at
    ``minute``) and how many of them failed, from the summary rows (``delivery_counts``).

One read: one transaction of three statements GET /metrics and the dashboard already use
(each an index range). Two schedulers, or two overlapping Lambda invocations, may log the
same minute twice; the alarms take each minute's maximum, so a repeat changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.logs import log_event
from chalicelib.services.metrics import oldest_due

log = logging.getLogger(__name__)

EVENT = "queue_health"


@dataclass(frozen=True, kw_only=True)
class QueueHealth:
    """What one ``queue_health`` line carries."""

    minute: datetime  #: the start of the minute the attempts were counted in
    oldest_due_lag_seconds: float
    attempts: int
    failed_attempts: int

    def fields(self) -> dict[str, Any]:
        """The event's fields (the names the metric filters read)."""
        return {
            "minute": self.minute.isoformat(),
            "oldest_due_lag_seconds": round(self.oldest_due_lag_seconds, 3),
            "attempts": self.attempts,
            "failed_attempts": self.failed_attempts,
        }


def minute_before(now: datetime) -> datetime:
    """The start of the last complete minute before ``now``."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=1)


def read(db: Database, now: datetime) -> QueueHealth:
    """The figures at ``now`` (one transaction)."""
    minute = minute_before(now)

    def figures(tx: Transaction) -> QueueHealth:
        oldest = oldest_due(tx, now)
        per_minute = tx.run(queries["overview_last_hour"], series_since=minute, until=now)
        counted = [r for r in per_minute if r["minute"] == minute]
        succeeded = sum(int(r["succeeded"]) for r in counted)
        failed = sum(int(r["failed"]) for r in counted)
        return QueueHealth(
            minute=minute,
            oldest_due_lag_seconds=0.0
            if oldest is None
            else max(0.0, (now - oldest).total_seconds()),
            attempts=succeeded + failed,
            failed_attempts=failed,
        )

    return db.transaction(figures, name=EVENT)


def report(db: Database, now: datetime) -> QueueHealth:
    """Read the figures and log them as one ``queue_health`` line."""
    health = read(db, now)
    log_event(log, EVENT, **health.fields())
    return health
