"""The typed rows of a job creation: what it reads, what it writes, and what it answers.

* :class:`EndpointRow`: an endpoint as ``jobs_get_endpoints`` reads it (with the
  fingerprint the fast path checks it against later).
* :class:`NewJob`: one job to create and where it comes from (a client, a batch, a
  callback, a new version of a cron job).
* :class:`JobRow` and :class:`ExecutionRow`: the rows ``jobs_create`` writes, built in
  Python (ids chosen here) so the answer needs no read back: :func:`create_params` turns
  them into the statement's parameters, :func:`created_view` into the answer.
* :class:`JobView`: a job and the execution shown with it, as every job use case answers.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from chalicelib.db.connection import Row
from chalicelib.domain.endpoints import endpoint_snapshot
from chalicelib.domain.job_delivery import max_attempts_of
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


@dataclass(frozen=True, kw_only=True)
class EndpointRow:
    """An endpoint as ``jobs_get_endpoints`` reads it: what a job created from it records
    (its snapshot), checks its input against (``payload_schema``) and inherits (default
    callbacks), and ``fingerprint``, the server's hash over all of it."""

    name: str
    endpoint_type: str
    payload_spec_ref: str | None
    config_ref: str | None
    spec: Any
    retry_policy: Any
    on_success: str | None  #: default callbacks of its jobs
    on_failure: str | None
    payload_schema: Any
    fingerprint: str
    #: flow_control.max_concurrency_per_key (None: the endpoint limits no key).
    max_concurrency_per_key: int | None = None

    @classmethod
    def from_row(cls, row: Row) -> EndpointRow:
        return cls(**{name: row[name] for name in _ENDPOINT_COLUMNS})

    @cached_property
    def snapshot(self) -> dict[str, Any]:
        """``jobs.endpoint_snapshot`` (built once per row and shared by its jobs)."""
        return endpoint_snapshot(vars(self))

    @property
    def has_default_callbacks(self) -> bool:
        return bool(self.on_success or self.on_failure)


_ENDPOINT_COLUMNS = (
    "name",
    "endpoint_type",
    "payload_spec_ref",
    "config_ref",
    "spec",
    "retry_policy",
    "on_success",
    "on_failure",
    "payload_schema",
    "fingerprint",
    "max_concurrency_per_key",
)


@dataclass(frozen=True)
class Replaces:
    """The cron job a new version replaces (``PUT /jobs/{id}``): the new row takes the next
    version number and keeps the old one's callbacks as they are."""

    job_id: str
    version: int
    on_success: str | None
    on_failure: str | None


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
    replaces: Replaces | None = None  #: a new version of a cron job (PUT /jobs/{id})


def new_id(prefix: str) -> str:
    """An id in the database's own form (``job_`` + 32 hex digits), chosen by the caller."""
    return prefix + secrets.token_hex(16)  # 32 hex digits, like the column defaults


@dataclass(frozen=True, kw_only=True)
class JobRow:
    """One ``jobs`` row as ``jobs_create`` writes it (the columns the database fills in are
    added by :func:`created_view`)."""

    job_id: str
    endpoint: str
    endpoint_type: str
    trigger_type: TriggerType
    idempotency_key: str | None
    input: Any
    run_at: datetime | None
    cron_expression: str | None = None
    cron_timezone: str | None = None
    cron_starts_at: datetime | None = None
    cron_ends_at: datetime | None = None
    cron_next_run_at: datetime | None = None
    endpoint_snapshot: dict[str, Any]
    version: int = 1
    previous_version_id: str | None = None
    batch_id: str | None = None
    on_success: str | None = None
    on_failure: str | None = None
    parent_execution_id: str | None = None
    callback_depth: int = 0
    #: The job's own headers and W3C trace context, sent with each delivery.
    headers: dict[str, str] | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    #: The job's own delivery settings (:mod:`chalicelib.domain.job_delivery`), or None.
    delivery_overrides: dict[str, Any] | None = None
    #: Executions of the endpoint sharing this key start one at a time (migration 031).
    ordering_key: str | None = None
    #: The key the job was given (migration 032), kept whatever its endpoint's setting.
    concurrency_key: str | None = None
    #: Whether the endpoint limited executions per key when the row was built: only then
    #: does the job's execution carry (and wait for) its concurrency key. Not a column.
    gated: bool = False
    #: Set by the fast path: write the row only if the endpoint still hashes to this.
    fingerprint: str | None = None

    @classmethod
    def build(
        cls,
        item: NewJob,
        endpoint: EndpointRow,
        callbacks: tuple[str | None, str | None],
        now: datetime,
        *,
        fingerprint: str | None = None,
    ) -> JobRow:
        """The row for ``item``, created from ``endpoint`` with these resolved callbacks."""
        request, replaces, schedule = item.request, item.replaces, item.request.schedule
        return cls(
            job_id=new_id("job_"),
            endpoint=endpoint.name,
            endpoint_type=endpoint.endpoint_type,
            trigger_type=request.trigger,
            idempotency_key=request.idempotency_key,
            input=request.input,
            run_at=request.run_at,
            cron_expression=None if schedule is None else schedule.expression,
            cron_timezone=None if schedule is None else schedule.timezone,
            cron_starts_at=None if schedule is None else schedule.starts_at,
            cron_ends_at=None if schedule is None else schedule.ends_at,
            cron_next_run_at=_first_run(request, now),
            endpoint_snapshot=endpoint.snapshot,
            version=1 if replaces is None else replaces.version + 1,
            previous_version_id=None if replaces is None else replaces.job_id,
            batch_id=item.batch_id,
            on_success=callbacks[0],
            on_failure=callbacks[1],
            parent_execution_id=item.parent_execution_id,
            callback_depth=item.depth,
            headers=request.headers,
            traceparent=None if request.trace is None else request.trace.traceparent,
            tracestate=None if request.trace is None else request.trace.tracestate,
            delivery_overrides=request.delivery_overrides,
            ordering_key=request.ordering_key,
            concurrency_key=request.concurrency_key,
            gated=request.concurrency_key is not None
            and endpoint.max_concurrency_per_key is not None,
            fingerprint=fingerprint,
        )

    @property
    def key(self) -> tuple[str, str] | None:
        """(endpoint, idempotency_key), the pair idx_jobs_idempotency holds unique."""
        return None if self.idempotency_key is None else (self.endpoint, self.idempotency_key)

    def statement_row(self) -> dict[str, Any]:
        """The JSON object ``jobs_create`` reads: no snapshot (sent once per endpoint) and
        no NULL columns (``->>`` of a missing key is NULL)."""
        return {
            name: value
            for name, value in vars(self).items()
            if value is not None and name not in ("endpoint_snapshot", "gated")
        }


def _first_run(request: JobRequest, now: datetime) -> datetime | None:
    """A CRON job's first run: as computed when its request was parsed, before the
    transaction (the API's requests all carry it); a request built without it (a test's)
    has it computed here."""
    if request.schedule is None:
        return None
    if request.first_run_at is not None:
        return request.first_run_at
    return request.schedule.first_run(now)


@dataclass(frozen=True, kw_only=True)
class ExecutionRow:
    """The one execution of a one-shot job, written by the statement that writes its job."""

    execution_id: str
    job_id: str
    endpoint: str
    endpoint_type: str
    #: Always None for a one-shot job's execution: the job holds the key (idx_jobs_idempotency
    #: makes creation idempotent). executions.idempotency_key is what idx_executions_cron_dedup
    #: dedups a cron job's ticks by; a one-shot job has one execution, so a key on it would
    #: dedup nothing and only add an entry to that unique index at each of the execution's
    #: writes (created, claimed, recorded: each update of the row is a new version with an
    #: entry in every index whose predicate it meets).
    idempotency_key: str | None
    status: ExecutionStatus
    run_at: datetime | None  #: None: the database's now() (IMMEDIATE)
    input: Any
    max_attempts: int
    batch_id: str | None
    on_success: str | None
    on_failure: str | None
    #: The job's ordering key; a keyed execution is written waiting behind its key's head
    #: and placed by its due time, the creating transaction's start, then ``ordering_seq``
    #: (its item's place in the request), until the key is settled in the same transaction.
    ordering_key: str | None = None
    ordering_seq: int | None = None
    #: The job's concurrency key, only when gated (:attr:`JobRow.gated`): it then waits for
    #: room in its key, placed as a keyed execution is.
    concurrency_key: str | None = None

    @classmethod
    def of(cls, job: JobRow, seq: int = 0) -> ExecutionRow | None:
        """The execution a new job starts with: none for a cron job (its ticks come from
        the scheduler). IMMEDIATE is due now (QUEUED); DELAYED waits for the promoter
        (PENDING), even when run_at is already past: the promoter queues it next pass."""
        if job.trigger_type is TriggerType.CRON:
            return None
        delayed = job.trigger_type is TriggerType.DELAYED
        return cls(
            execution_id=new_id("exec_"),
            job_id=job.job_id,
            endpoint=job.endpoint,
            endpoint_type=job.endpoint_type,
            idempotency_key=None,
            status=ExecutionStatus.PENDING if delayed else ExecutionStatus.QUEUED,
            run_at=job.run_at,
            input=job.input,
            max_attempts=max_attempts_of(
                job.endpoint_snapshot["retry_policy"], job.delivery_overrides
            ),
            batch_id=job.batch_id,
            on_success=job.on_success,
            on_failure=job.on_failure,
            ordering_key=job.ordering_key,
            ordering_seq=None if job.ordering_key is None and not job.gated else seq,
            concurrency_key=job.concurrency_key if job.gated else None,
        )

    def statement_row(self) -> dict[str, Any]:
        """The JSON object ``jobs_create`` reads (the ordering fields only when keyed)."""
        row = vars(self)
        if self.ordering_key is None and self.concurrency_key is None:
            return {k: v for k, v in row.items() if k not in _ORDERING_FIELDS}
        return row


_ORDERING_FIELDS = ("ordering_key", "ordering_seq", "concurrency_key")


def create_params(jobs: Sequence[JobRow], executions: Sequence[ExecutionRow]) -> dict[str, str]:
    """``jobs_create``'s parameters: the job rows, each endpoint's snapshot once
    (``:snapshots``, by endpoint name), and the execution rows, as JSONB arrays."""
    snapshots = {job.endpoint: job.endpoint_snapshot for job in jobs}
    return {
        "jobs": _json([job.statement_row() for job in jobs]),
        "snapshots": json.dumps(snapshots, separators=(",", ":")),
        "executions": _json([e.statement_row() for e in executions]),
    }


def _json(rows: list[dict[str, Any]]) -> str:
    """Rows as the JSONB array the multi-row statements read (timestamps as ISO 8601)."""
    return json.dumps(rows, separators=(",", ":"), default=_iso)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def created_view(job: JobRow, execution: ExecutionRow | None, now: datetime) -> JobView:
    """The view of a job the statement inserted, from what it inserted: the columns the
    database filled in are its defaults (created_at is the statement's now())."""
    stored = {
        **vars(job),
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
            "execution_id": execution.execution_id,
            "job_id": job.job_id,
            "status": execution.status,
            "attempt_count": 0,
            "run_at": execution.run_at or now,
            "started_at": None,
            "completed_at": None,
            "created_at": now,
        }
    return JobView.from_rows(stored, summary)
