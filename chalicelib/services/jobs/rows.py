"""The rows a job creation writes and the view it answers with, built in Python from the
request and the endpoint: :mod:`chalicelib.services.jobs.create` (the full transaction) and
:mod:`chalicelib.services.jobs.fastpath` (one statement) both write through ``jobs_create``
with these.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Row
from chalicelib.domain.jobs import JobRequest
from chalicelib.domain.statuses import ExecutionStatus, JobStatus, TriggerType
from chalicelib.services.views import ExecutionSummary, Job


@dataclass(frozen=True)
class JobView:
    """A job and the execution shown with it (one-shot: its execution; cron: latest)."""

    job: Job
    execution: ExecutionSummary | None = None

    @classmethod
    def from_rows(cls, job: Row, execution: Row | None = None) -> JobView:
        return cls(Job.from_row(job), ExecutionSummary.maybe(execution))

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def created_at(self) -> datetime:
        """With :attr:`job_id`, the keyset a page of jobs is cut on."""
        return self.job.created_at


@dataclass(frozen=True)
class NewJob:
    """One job to create and where it comes from."""

    request: JobRequest
    batch_id: str | None = None
    parent_execution_id: str | None = None  #: a callback job: the execution it reports
    depth: int = 0  #: place in a chain of callbacks (0: created by a client)
    #: Created by the service (a callback): its input is the documented report, not checked
    #: against a payload spec, and default callbacks it cannot honour are dropped.
    system: bool = False


def new_id(prefix: str) -> str:
    """An id in the database's own form (``job_`` + 32 hex digits), chosen by the caller."""
    return prefix + secrets.token_hex(16)  # 32 hex digits, like the column defaults


def job_row(
    item: NewJob,
    endpoint: Row,
    snapshot: dict[str, Any],
    callbacks: tuple[str | None, ...],
    now: datetime,
) -> dict[str, Any]:
    """The jobs row for ``item``; ``snapshot`` is ``endpoint_snapshot(endpoint)``, built once
    per endpoint by the caller and shared by its jobs."""
    request = item.request
    row: dict[str, Any] = {
        "job_id": new_id("job_"),
        "endpoint": endpoint["name"],
        "endpoint_type": endpoint["endpoint_type"],
        "trigger_type": request.trigger.value,
        "idempotency_key": request.idempotency_key,
        "input": request.input,
        "run_at": request.run_at,
        "cron_expression": None,
        "cron_timezone": None,
        "cron_starts_at": None,
        "cron_ends_at": None,
        "cron_next_run_at": None,
        "endpoint_snapshot": snapshot,
        "version": 1,
        "previous_version_id": None,
        "batch_id": item.batch_id,
        "on_success": callbacks[0],
        "on_failure": callbacks[1],
        "parent_execution_id": item.parent_execution_id,
        "callback_depth": item.depth,
    }
    schedule = request.schedule
    if schedule is not None:
        row.update(
            cron_expression=schedule.expression,
            cron_timezone=schedule.timezone,
            cron_starts_at=schedule.starts_at,
            cron_ends_at=schedule.ends_at,
            cron_next_run_at=schedule.first_run(now),
        )
    return row


def json_rows(rows: list[dict[str, Any]]) -> str:
    """Rows as the JSONB array the multi-row statements read (timestamps as ISO 8601)."""
    return json.dumps(rows, separators=(",", ":"), default=_iso)


def create_params(jobs: list[dict[str, Any]], executions: list[dict[str, Any]]) -> dict[str, str]:
    """``jobs_create``'s parameters: the job rows without their endpoint snapshots, which
    go once per endpoint (``:snapshots``), nor their NULL columns (``->>`` of a missing key
    is NULL), and the execution rows."""
    snapshots = {job["endpoint"]: job["endpoint_snapshot"] for job in jobs}
    bare = [
        {k: v for k, v in job.items() if v is not None and k != "endpoint_snapshot"} for job in jobs
    ]
    return {
        "jobs": json_rows(bare),
        "snapshots": json.dumps(snapshots, separators=(",", ":")),
        "executions": json_rows(executions),
    }


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def created_view(job: dict[str, Any], execution: dict[str, Any] | None, now: datetime) -> JobView:
    """The view of a job this transaction inserted, from what it inserted: the columns the
    database filled in are its defaults (created_at is the transaction's now())."""
    stored = {
        **job,
        "status": JobStatus.ACTIVE.value,
        "replaced_by_id": None,
        "cron_last_tick_at": None,
        "created_at": now,
        "retired_at": None,
        "paused_at": None,
        "schedule_error": None,
    }
    summary = None
    if execution is not None:
        summary = {
            "execution_id": execution["execution_id"],
            "job_id": job["job_id"],
            "status": execution["status"],
            "attempt_count": 0,
            "run_at": execution["run_at"] or now,
            "started_at": None,
            "completed_at": None,
            "created_at": now,
        }
    return JobView.from_rows(stored, summary)


def execution_row(job: dict[str, Any]) -> dict[str, Any]:
    # IMMEDIATE is due now (QUEUED); DELAYED waits for the promoter (PENDING), even when
    # run_at is already past: the promoter queues it on its next pass.
    delayed = job["trigger_type"] == TriggerType.DELAYED
    status = ExecutionStatus.PENDING if delayed else ExecutionStatus.QUEUED
    return {
        "execution_id": new_id("exec_"),
        "job_id": job["job_id"],
        "endpoint": job["endpoint"],
        "endpoint_type": job["endpoint_type"],
        "idempotency_key": job["idempotency_key"],
        "status": status.value,
        "run_at": job["run_at"],
        "input": job["input"],
        "max_attempts": int(job["endpoint_snapshot"]["retry_policy"]["max_attempts"]),
        "batch_id": job["batch_id"],
        "on_success": job["on_success"],
        "on_failure": job["on_failure"],
    }
