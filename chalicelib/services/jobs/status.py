"""A job's health and its executions: ``GET /jobs/{id}/status`` and ``/executions``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.health import WINDOW, Health, compute_health
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import TriggerType
from chalicelib.services.jobs.service import get_job_in
from chalicelib.services.views import Execution, ExecutionSummary, Job

#: The stats and the health count the same executions: those created in the health window.
STATS_WINDOW = WINDOW
#: The window's executions read at most (the newest): the status of a job that runs very
#: often costs a bounded read (jobs_window_stats), and is judged on its latest 1,000
#: executions of the day (a job ticking every minute has 1,440 a day).
STATS_MAX_ROWS = 1_000


@dataclass(frozen=True, kw_only=True)
class WindowStats:
    """Executions created in the last 24 hours: counts and durations (ms, rounded)."""

    total: int
    succeeded: int
    failed: int
    avg_duration_ms: int | None
    p99_duration_ms: int | None

    @classmethod
    def from_row(cls, row: Row) -> WindowStats:
        """From ``jobs_window_stats`` (an empty row counts as no executions)."""
        return cls(
            total=int(row.get("total") or 0),
            succeeded=int(row.get("succeeded") or 0),
            failed=int(row.get("failed") or 0),
            avg_duration_ms=_int_or_none(row.get("avg_duration_ms")),
            p99_duration_ms=_int_or_none(row.get("p99_duration_ms")),
        )


@dataclass(frozen=True, kw_only=True)
class JobHealthReport:
    """Everything ``GET /jobs/{id}/status`` shows, as read in one transaction."""

    job: Job
    health: Health
    last_execution: ExecutionSummary | None
    pending: int
    running: int
    stats: WindowStats


@dataclass(frozen=True)
class JobStatusService:
    """Health over the last 24 hours (window end = ``clock()``) and execution lists."""

    db: Database
    clock: Callable[[], datetime]

    def status(self, job_id: str) -> JobHealthReport:
        since = self.clock() - STATS_WINDOW
        return self.db.transaction(lambda tx: self._status_in(tx, job_id, since), name="job_status")

    def _status_in(self, tx: Transaction, job_id: str, since: datetime) -> JobHealthReport:
        job = get_job_in(tx, job_id)
        stats = WindowStats.from_row(
            tx.one(
                queries["jobs_window_stats"], job_id=job_id, since=since, max_rows=STATS_MAX_ROWS
            )
            or {}
        )
        active = _active_counts(tx, job) or {}
        latest = tx.one(queries["jobs_latest_execution"], job_id=job_id)
        view = Job.from_row(job)
        return JobHealthReport(
            job=view,
            health=_health(view, stats),
            last_execution=ExecutionSummary.maybe(latest),
            pending=int(active.get("pending") or 0),
            running=int(active.get("running") or 0),
            stats=stats,
        )

    def executions(self, job_id: str, status: str | None, page: PageRequest) -> list[Execution]:
        """A keyset page of the job's executions, newest first (404 for an unknown job)."""

        def work(tx: Transaction) -> list[Execution]:
            get_job_in(tx, job_id)
            query, params = shaped(
                queries["executions_list_for_job"],
                {"job_id": job_id, "status": status, **page.params()},
            )
            rows = tx.run(query, **params)
            return [Execution.from_row(row) for row in rows]

        return self.db.transaction(work, name="job_executions")


def _active_counts(tx: Transaction, job: Row) -> Row | None:
    """In-flight executions: a one-shot job's one, or a cron job's among its newest."""
    if job["trigger_type"] == TriggerType.CRON:
        return tx.one(
            queries["jobs_active_counts_cron"], job_id=job["job_id"], max_rows=STATS_MAX_ROWS
        )
    return tx.one(queries["jobs_active_counts"], job_id=job["job_id"])


def _health(job: Job, stats: WindowStats) -> Health:
    """The window's health (:func:`compute_health`, the definition endpoints share); FAILING
    whatever the window when the scheduler set the job aside (it will not tick again until
    replaced: chalicelib/scheduler/materializer.py)."""
    if job.schedule_error is not None:
        return Health.FAILING
    return compute_health(total=stats.total, succeeded=stats.succeeded, failed=stats.failed)


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
