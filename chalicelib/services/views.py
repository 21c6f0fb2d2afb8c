"""Typed, frozen views of jobs, executions, attempts and log lines, as services return them.

Each view is built from one row of a named query by ``from_row`` (as procrastinate's
``Job.from_row``), so nothing above the services reads a row dict: renderers in
:mod:`chalicelib.api` read attributes, and a column a query stops returning fails here,
at the boundary, not in a renderer. Timestamps are timezone-aware ``datetime`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.db.connection import Row
from chalicelib.domain.statuses import (
    AttemptStatus,
    EndpointType,
    ExecutionStatus,
    JobStatus,
    LogLevel,
    TriggerType,
)


@dataclass(frozen=True, kw_only=True)
class Job:
    """One version of a job, read through ``job_states`` (a one-shot's status follows its
    execution)."""

    job_id: str
    endpoint: str
    endpoint_type: EndpointType
    trigger_type: TriggerType
    status: JobStatus
    version: int
    previous_version_id: str | None
    replaced_by_id: str | None
    idempotency_key: str | None
    input: Any
    run_at: datetime | None
    cron_expression: str | None
    cron_timezone: str | None
    cron_starts_at: datetime | None
    cron_ends_at: datetime | None
    cron_next_run_at: datetime | None
    cron_last_tick_at: datetime | None
    created_at: datetime
    retired_at: datetime | None

    @classmethod
    def from_row(cls, row: Row) -> Job:
        return cls(
            job_id=row["job_id"],
            endpoint=row["endpoint"],
            endpoint_type=EndpointType(row["endpoint_type"]),
            trigger_type=TriggerType(row["trigger_type"]),
            status=JobStatus(row["status"]),
            version=int(row["version"]),
            previous_version_id=row["previous_version_id"],
            replaced_by_id=row["replaced_by_id"],
            idempotency_key=row["idempotency_key"],
            input=row["input"],
            run_at=row["run_at"],
            cron_expression=row["cron_expression"],
            cron_timezone=row["cron_timezone"],
            cron_starts_at=row["cron_starts_at"],
            cron_ends_at=row["cron_ends_at"],
            cron_next_run_at=row["cron_next_run_at"],
            cron_last_tick_at=row["cron_last_tick_at"],
            created_at=row["created_at"],
            retired_at=row["retired_at"],
        )


@dataclass(frozen=True, kw_only=True)
class ExecutionSummary:
    """The execution a job is shown with (its one execution, or a cron job's latest)."""

    execution_id: str
    job_id: str
    status: ExecutionStatus
    attempt_count: int
    run_at: datetime | None
    started_at: datetime | None
    completed_at: datetime | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> ExecutionSummary:
        return cls(
            execution_id=row["execution_id"],
            job_id=row["job_id"],
            status=ExecutionStatus(row["status"]),
            attempt_count=int(row["attempt_count"]),
            run_at=row["run_at"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            created_at=row["created_at"],
        )

    @classmethod
    def maybe(cls, row: Row | None) -> ExecutionSummary | None:
        return None if row is None else cls.from_row(row)


@dataclass(frozen=True, kw_only=True)
class Execution:
    """Everything a user may learn about one execution (never its config snapshot)."""

    execution_id: str
    job_id: str
    endpoint: str
    endpoint_type: EndpointType
    status: ExecutionStatus
    input: Any
    output: Any
    attempt_count: int
    max_attempts: int
    run_at: datetime | None
    started_at: datetime | None
    completed_at: datetime | None
    duration_ms: int | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> Execution:
        return cls(
            execution_id=row["execution_id"],
            job_id=row["job_id"],
            endpoint=row["endpoint"],
            endpoint_type=EndpointType(row["endpoint_type"]),
            status=ExecutionStatus(row["status"]),
            input=row["input"],
            output=row["output"],
            attempt_count=int(row["attempt_count"]),
            max_attempts=int(row["max_attempts"]),
            run_at=row["run_at"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            duration_ms=row["duration_ms"],
            created_at=row["created_at"],
        )


@dataclass(frozen=True)
class ExecutionDetail:
    """One execution as ``GET /executions/{id}`` shows it: with its queue position."""

    execution: Execution
    queue_position: int | None  #: 1-based place in the claim order while QUEUED

    @property
    def status(self) -> ExecutionStatus:
        return self.execution.status


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One send of an execution and its outcome."""

    attempt_id: str
    execution_id: str
    attempt_number: int
    status: AttemptStatus
    started_at: datetime | None
    completed_at: datetime | None
    duration_ms: int | None
    output: Any
    error: Any
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> Attempt:
        return cls(
            attempt_id=row["attempt_id"],
            execution_id=row["execution_id"],
            attempt_number=int(row["attempt_number"]),
            status=AttemptStatus(row["status"]),
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            duration_ms=row["duration_ms"],
            output=row["output"],
            error=row["error"],
            created_at=row["created_at"],
        )


@dataclass(frozen=True, kw_only=True)
class LogLine:
    """One line of an execution's log."""

    log_id: str
    execution_id: str
    attempt_number: int
    level: LogLevel
    message: str
    logged_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> LogLine:
        return cls(
            log_id=row["log_id"],
            execution_id=row["execution_id"],
            attempt_number=int(row["attempt_number"]),
            level=LogLevel(row["level"]),
            message=row["message"],
            logged_at=row["logged_at"],
        )
