"""The ``queue_health`` log event: the deployment's delivery figures and live processes,
once a minute.

CloudWatch does not scrape GET /metrics; in AWS the alarms on queue lag, delivery failure
rate and a stopped worker or scheduler (``infra/stacks/observability.py``) read this event
through metric filters instead. The housekeeper logs it once a minute (it runs every
minute in the ``reclaim_stuck_executions`` Lambda and in every long-lived scheduler) with:

``oldest_due_lag_seconds``
    how long the oldest due work has waited past its time (an execution not claimed,
    paused endpoints left out; a DELAYED run not promoted; a cron tick not materialized):
    ``te_oldest_due_lag_seconds`` at the same instant (0 when nothing is due);
``minute``, ``attempts``, ``failed_attempts``
    the delivery attempts finished in the last complete minute (the one starting at
    ``minute``) and how many of them failed, from the summary rows (``delivery_counts``);
``live_workers``, ``live_schedulers``
    the worker and scheduler processes whose heartbeat is fresh:
    ``te_live_processes{kind="worker"|"scheduler"}`` at the same instant. A worker that
    stopped shows here as 0 (the ``WorkerStopped`` alarm); a scheduler that stopped logs no
    line at all, and the line's absence is what the ``SchedulerStopped`` alarm watches (the
    housekeeper logging it is one of the live schedulers).

Two reads: one transaction of three statements GET /metrics and the dashboard already use
(each an index range), then the processes by kind
(:func:`~chalicelib.health.heartbeat.live_processes`, one index range per kind; a snapshot
of its own is enough, as liveness does not depend on the delivery figures). Two schedulers,
or two overlapping Lambda invocations, may log the same minute twice; the alarms take each
minute's maximum, so a repeat changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.health.heartbeat import SCHEDULER, WORKER, live_processes
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
    live_workers: int
    live_schedulers: int

    def fields(self) -> dict[str, Any]:
        """The event's fields (the names the metric filters read)."""
        return {
            "minute": self.minute.isoformat(),
            "oldest_due_lag_seconds": round(self.oldest_due_lag_seconds, 3),
            "attempts": self.attempts,
            "failed_attempts": self.failed_attempts,
            "live_workers": self.live_workers,
            "live_schedulers": self.live_schedulers,
        }


def minute_before(now: datetime) -> datetime:
    """The start of the last complete minute before ``now``."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=1)


def read(db: Database, now: datetime) -> QueueHealth:
    """The figures at ``now`` (one transaction, then the processes by kind)."""
    minute = minute_before(now)

    def figures(tx: Transaction) -> tuple[float, int, int]:
        oldest = oldest_due(tx, now)
        per_minute = tx.run(queries["overview_last_hour"], series_since=minute, until=now)
        counted = [r for r in per_minute if r["minute"] == minute]
        succeeded = sum(int(r["succeeded"]) for r in counted)
        failed = sum(int(r["failed"]) for r in counted)
        lag = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
        return lag, succeeded + failed, failed

    lag, attempts, failed = db.transaction(figures, name=EVENT)
    live = {k.kind: k.live for k in live_processes(db, now)}
    return QueueHealth(
        minute=minute,
        oldest_due_lag_seconds=lag,
        attempts=attempts,
        failed_attempts=failed,
        live_workers=live[WORKER],
        live_schedulers=live[SCHEDULER],
    )


def report(db: Database, now: datetime) -> QueueHealth:
    """Read the figures and log them as one ``queue_health`` line."""
    health = read(db, now)
    log_event(log, EVENT, **health.fields())
    return health
