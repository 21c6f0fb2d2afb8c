"""A job's health and its executions: ``GET /jobs/{id}/status`` and ``/executions``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.jobs import Health, compute_health
from chalicelib.domain.pagination import PageRequest
from chalicelib.services.executions import page_params
from chalicelib.services.jobs import get_job_in

STATS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, kw_only=True)
class JobHealthReport:
    """Everything ``GET /jobs/{id}/status`` shows, as read in one transaction."""

    job: Row
    health: Health
    last_execution: Row | None
    pending: int
    running: int
    stats: Row


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
        stats = tx.one(queries["jobs_window_stats"], job_id=job_id, since=since) or {}
        active = tx.one(queries["jobs_active_counts"], job_id=job_id) or {}
        counts = {k: int(stats.get(k) or 0) for k in ("total", "succeeded", "failed")}
        return JobHealthReport(
            job=job,
            health=compute_health(**counts),
            last_execution=tx.one(queries["jobs_latest_execution"], job_id=job_id),
            pending=int(active.get("pending") or 0),
            running=int(active.get("running") or 0),
            stats={
                **counts,
                "avg_duration_ms": _int_or_none(stats.get("avg_duration_ms")),
                "p99_duration_ms": _int_or_none(stats.get("p99_duration_ms")),
            },
        )

    def executions(self, job_id: str, status: str | None, page: PageRequest) -> list[Row]:
        """A keyset page of the job's executions, newest first (404 for an unknown job)."""

        def work(tx: Transaction) -> list[Row]:
            get_job_in(tx, job_id)
            return tx.run(
                queries["executions_list_for_job"],
                job_id=job_id,
                status=status,
                **page_params(page),
            )

        return self.db.transaction(work, name="job_executions")


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
