"""Loop 4: the housekeeper. Bounded history and bounded heartbeat rows; endpoints that
have failed too long.

Every ``HOUSEKEEPING_INTERVAL_SEC`` it

* removes ``region_heartbeats`` rows of processes silent for more than a day (each process
  writes its own row, ``<role>@<host>:<pid>``, and a dead one never returns under it), and
  ``metric_events`` rows older than a day (GET /metrics reads the last minute);
* when ``TE_EXECUTION_RETENTION_DAYS`` is positive (default 30; 0 keeps everything),
  deletes terminal executions created and finished longer ago than that, with their
  attempts and logs, and one-shot jobs left without executions (a one-shot job goes with
  its execution; cron jobs stay, their version chain is their history);
* when ``TE_OPERATION_RETENTION_DAYS`` is positive (default 7; 0 keeps everything),
  deletes bulk operations that ended (DONE, ABORTED, FAILED) longer ago than that. A
  RUNNING operation is never deleted, however old: it still has pages to work through.
* judges a page of endpoints by the FAILING rule (:mod:`chalicelib.services.auto_pause`):
  an endpoint whose attempts have all failed for longer than its ``auto_pause_after_ms``
  is paused (``paused_reason`` FAILING), counted and reported to ``TE_OPERATOR_ENDPOINT``.

Each statement deletes at most ``batch_size`` executions (``housekeeping.sql``), so no
transaction holds many locks for long; a full batch makes the loop come straight back, so
a backlog (the first run over a year of history) drains batch by batch at full speed
while each transaction stays short. It never touches a non-terminal row, which is all the
worker, promoter and reclaimer work on. Safe with any number of schedulers: batches are
taken with SKIP LOCKED and a row deleted twice is found once.

No row can stop it: a one-shot job whose other execution is still live (the purge would
break its foreign key) is skipped until it can go whole (``housekeeping.sql``), and each
step (heartbeats, metric events, each purge) runs on its own, so one that fails does not
keep the others from running; the pass then fails with it and the loop backs off.

Metric lines: ``history_purged`` with ``count`` (rows removed in all) and the breakdown
(``executions``, ``attempts``, ``logs``, ``jobs``, ``heartbeats``, ``operations``); and,
once a minute (not again when a full batch brings the pass straight back),
``queue_health``: the deployment's lag and the last minute's attempts, which the AWS
alarms read (:mod:`chalicelib.scheduler.queue_health`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.clock import utcnow
from chalicelib.logs import FailureLog
from chalicelib.runtime.loop import Progress
from chalicelib.scheduler import queue_health
from chalicelib.services.auto_pause import FailingWatch

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_SEC = 60.0
#: A heartbeat row silent for this long belongs to a dead process.
HEARTBEAT_TTL = timedelta(days=1)
#: metric_events rows (GET /metrics reads the last minute) are kept this long.
METRIC_EVENTS_TTL = timedelta(days=1)
#: delivery_counts (migrations 017, 019): each writer's minute rows are rolled up into
#: the totals and the all-endpoint series once their minute ended this long ago (no
#: finalize adds to a minute after it, and the last minute's gauges read them raw).
MINUTE_ROWS_KEPT = timedelta(minutes=3)
#: Series rows (the dashboard's last hour, by minute) and hourly marks of the totals (a
#: day's window subtracts the mark of a day ago) are kept this long.
SERIES_KEPT = timedelta(hours=2)
MARKS_KEPT = timedelta(days=2)
#: An ordering or concurrency key's row is kept this long after its last use (touched_at).
ORDERING_KEYS_IDLE = timedelta(days=1)

#: Executions each purge statement deletes at most, by default (the bench reads it too).
PURGE_BATCH = 500

_COUNTED = ("executions", "attempts", "logs", "jobs")
#: Every kind of row a pass removes, as its metric line breaks them down.
_KINDS = (*_COUNTED, "heartbeats", "operations")

#: One step of a pass: (rows removed by kind, its batch was full).
Step = Callable[[datetime], tuple[dict[str, int], bool]]


@dataclass(frozen=True)
class Purged:
    """Rows one pass removed, by kind; ``full``: a batch was full (more may be waiting)."""

    executions: int = 0
    attempts: int = 0
    logs: int = 0
    jobs: int = 0
    heartbeats: int = 0
    operations: int = 0
    full: bool = False

    @property
    def total(self) -> int:
        return sum(getattr(self, kind) for kind in _KINDS)


class Housekeeper:
    """Prunes heartbeats and purges history past retention; one :meth:`run_once` per pass."""

    def __init__(
        self,
        db: Database,
        *,
        retention_days: int,
        operation_retention_days: int = 0,
        batch_size: int = PURGE_BATCH,
        clock: Callable[[], datetime] = utcnow,
        operator_endpoint: str | None = None,
    ) -> None:
        """``operator_endpoint``: where the event of a FAILING pause is sent
        (``TE_OPERATOR_ENDPOINT``; None: nowhere)."""
        if retention_days < 0 or operation_retention_days < 0 or batch_size <= 0:
            raise ValueError("retention days must be >= 0 and batch_size > 0")
        self._db = db
        self._failing = FailingWatch(db, operator_endpoint=operator_endpoint)
        self._retention = timedelta(days=retention_days) if retention_days else None
        self._operation_retention = (
            timedelta(days=operation_retention_days) if operation_retention_days else None
        )
        self._batch_size = batch_size
        self._clock = clock
        self._failures: dict[str, FailureLog] = {}
        self._health_reported: datetime | None = None  # the minute last reported
        self._marked: datetime | None = None  # the hour whose mark this process wrote

    def run_once(self) -> Progress:
        """One pass: heartbeats, then one batch of each purge."""
        purged = self.purge()
        detail = {k: getattr(purged, k) for k in _KINDS}
        return Progress(purged.total, purged.full, detail)

    def purge(self) -> Purged:
        """Each step on its own: one that fails (logged, once per streak) does not keep
        the others from running; the first failure is raised after them, so the loop
        reports it and backs off."""
        now = self._clock()
        counts = dict.fromkeys(_KINDS, 0)
        full = False
        failures: list[Exception] = []
        for step in self._steps():
            try:
                done, step_full = step(now)
            except Exception as exc:
                self._failure_log(step.__name__).failed(exc)
                failures.append(exc)
                continue
            self._failure_log(step.__name__).succeeded()
            full = full or step_full
            for key, amount in done.items():
                counts[key] += amount
        if failures:
            raise failures[0]
        return Purged(full=full, **counts)

    def _steps(self) -> list[Step]:
        steps: list[Step] = [
            self._report_queue_health,
            self._prune_heartbeats,
            self._prune_metric_events,
            self._fold_delivery_counts,
            self._pause_failing_endpoints,
            self._prune_ordering_keys,
            self._prune_concurrency_keys,
        ]
        if self._retention is not None:
            steps += [self._purge_one_shot, self._purge_cron]
        if self._operation_retention is not None:
            steps.append(self._purge_operations)
        return steps

    def _failure_log(self, step: str) -> FailureLog:
        if step not in self._failures:
            self._failures[step] = FailureLog(log, f"housekeeper {step.strip('_')}")
        return self._failures[step]

    def _report_queue_health(self, now: datetime) -> tuple[dict[str, int], bool]:
        """The ``queue_health`` line, once per minute of the clock."""
        minute = queue_health.minute_before(now)
        if minute != self._health_reported:
            queue_health.report(self._db, now)
            self._health_reported = minute
        return {}, False

    def _prune_heartbeats(self, now: datetime) -> tuple[dict[str, int], bool]:
        pruned = self._db.execute(
            queries["housekeeping_prune_heartbeats"], cutoff=now - HEARTBEAT_TTL
        )
        return {"heartbeats": pruned}, False

    def _prune_metric_events(self, now: datetime) -> tuple[dict[str, int], bool]:
        self._db.execute(
            queries["housekeeping_prune_metric_events"], cutoff=now - METRIC_EVENTS_TTL
        )
        return {}, False

    def _prune_ordering_keys(self, now: datetime) -> tuple[dict[str, int], bool]:
        """One batch of the rows of ordering keys idle for a day with nothing left."""
        pruned = self._db.execute(
            queries["housekeeping_prune_ordering_keys"],
            cutoff=now - ORDERING_KEYS_IDLE,
            batch=self._batch_size,
        )
        return {}, pruned >= self._batch_size

    def _prune_concurrency_keys(self, now: datetime) -> tuple[dict[str, int], bool]:
        """One batch of the rows of concurrency keys idle for a day with nothing left."""
        pruned = self._db.execute(
            queries["housekeeping_prune_concurrency_keys"],
            cutoff=now - ORDERING_KEYS_IDLE,
            batch=self._batch_size,
        )
        return {}, pruned >= self._batch_size

    def _fold_delivery_counts(self, now: datetime) -> tuple[dict[str, int], bool]:
        """One batch of minute rows rolled up into the totals and the series, the hour's
        mark of the totals (once), and series and marks past their time pruned."""
        params = {"cutoff": now - MINUTE_ROWS_KEPT, "batch": self._batch_size}

        def fold(tx: Transaction) -> int:
            folded = int(tx.scalar(queries["housekeeping_fold_counts"], **params) or 0)
            if folded:
                tx.execute(queries["housekeeping_fold_delete"], **params)
            return folded

        folded = self._db.transaction(fold, name="housekeeping_fold_counts")
        hour = now.replace(minute=0, second=0, microsecond=0)
        if hour != self._marked:  # once an hour (another scheduler's mark is kept)
            self._db.execute(queries["housekeeping_mark_totals"], hour=hour)
            self._marked = hour
        self._db.execute(queries["housekeeping_prune_series"], cutoff=now - SERIES_KEPT)
        self._db.execute(queries["housekeeping_prune_marks"], cutoff=now - MARKS_KEPT)
        return {}, folded >= self._batch_size

    def _pause_failing_endpoints(self, now: datetime) -> tuple[dict[str, int], bool]:
        """A page of endpoints judged by the FAILING rule (those failing every attempt for
        longer than their auto_pause_after_ms are paused); a full page brings the pass back
        for the next one."""
        _, full = self._failing.run(now)
        return {}, full

    def _purge_one_shot(self, now: datetime) -> tuple[dict[str, int], bool]:
        return self._purge("housekeeping_purge_one_shot", now)

    def _purge_cron(self, now: datetime) -> tuple[dict[str, int], bool]:
        return self._purge("housekeeping_purge_cron", now)

    def _purge(self, name: str, now: datetime) -> tuple[dict[str, int], bool]:
        assert self._retention is not None
        row = self._db.run(queries[name], cutoff=now - self._retention, batch=self._batch_size)[0]
        return {key: int(row[key]) for key in _COUNTED}, row["batch"] >= self._batch_size

    def _purge_operations(self, now: datetime) -> tuple[dict[str, int], bool]:
        """One batch of bulk operations that ended before the retention cutoff."""
        assert self._operation_retention is not None
        row = self._db.run(
            queries["housekeeping_purge_operations"],
            cutoff=now - self._operation_retention,
            batch=self._batch_size,
        )[0]
        removed = int(row["operations"])
        return {"operations": removed}, removed >= self._batch_size
