"""Typed, frozen views of jobs, executions, attempts and log lines, as services return them.

Each view is built from one row of a named query by ``from_row`` (as procrastinate's
``Job.from_row``), so nothing above the services reads a row dict: renderers in
:mod:`chalicelib.api` read attributes, and a column a query stops returning fails here,
at the boundary, not in a renderer. Timestamps are timezone-aware ``datetime`` values.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum
from typing import Any, Self, get_type_hints

from chalicelib.db.connection import Row
from chalicelib.domain.statuses import (
    AttemptStatus,
    EndpointType,
    ExecutionStatus,
    JobStatus,
    LogLevel,
    TriggerType,
)

#: An enum's members by value: a dict lookup instead of ``Enum(value)``'s call machinery.
Members = dict[Any, Enum]

#: Per view class: its fields, each with the members its column's text becomes (or None).
_COLUMNS: dict[type, list[tuple[str, Members | None]]] = {}


def _columns(cls: type) -> list[tuple[str, Members | None]]:
    """The fields of a view class and their enums' members (computed once per class;
    idempotent): a page of 1,000 jobs builds 2,000 views, so none of this is redone per
    row."""
    columns = _COLUMNS.get(cls)
    if columns is None:
        hints = get_type_hints(cls)
        columns = _COLUMNS[cls] = [(f.name, _members(hints[f.name])) for f in fields(cls)]
    return columns


def _members(hint: Any) -> Members | None:
    if isinstance(hint, type) and issubclass(hint, Enum):
        return {member.value: member for member in hint}
    return None


@dataclass(frozen=True, kw_only=True)
class RowView:
    """A view whose fields are the columns of the same name.

    ``from_row`` reads every field from the row (a missing column is a ``KeyError`` here,
    not a wrong answer later) and turns the text of a field typed as a status enum into
    its member (an unknown text is a ``ValueError``, as ``Enum(text)`` raises).
    """

    @classmethod
    def from_row(cls, row: Row) -> Self:
        values = {}
        for name, members in _columns(cls):
            value = row[name]
            if members is not None and value is not None:
                try:
                    value = members[value]
                except KeyError:
                    raise ValueError(f"{value!r} is not a valid {cls.__name__}.{name}") from None
            values[name] = value
        # What the frozen dataclass's __init__ would do, without its object.__setattr__ per
        # field (ten times slower for a job's 24 fields; a batch builds 2,000 views). Every
        # field is set: values holds one per field. The view stays frozen afterwards.
        view = object.__new__(cls)
        view.__dict__.update(values)
        return view


@dataclass(frozen=True, kw_only=True)
class Job(RowView):
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
    batch_id: str | None  #: the batch that created it (POST /jobs/batch)
    on_success: str | None  #: callback endpoints (the job's own or its endpoint's default)
    on_failure: str | None
    parent_execution_id: str | None  #: set on a callback job: the execution it reports
    paused_at: datetime | None  #: a paused cron job: no ticks until resumed
    #: why the materializer set this cron job aside (it has no next tick then)
    schedule_error: str | None
    #: what POST /jobs set for this job's delivery over its endpoint (None: nothing)
    delivery_overrides: dict[str, Any] | None
    #: its executions start one at a time with the endpoint's others of this key (None: none)
    ordering_key: str | None
    #: at most the endpoint's max_concurrency_per_key executions of this key run at once,
    #: where the endpoint sets it (None: none)
    concurrency_key: str | None


@dataclass(frozen=True, kw_only=True)
class ExecutionSummary(RowView):
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
    def maybe(cls, row: Row | None) -> Self | None:
        return None if row is None else cls.from_row(row)


@dataclass(frozen=True, kw_only=True)
class Execution(ExecutionSummary):
    """Everything a user may learn about one execution (never its config snapshot)."""

    endpoint: str
    endpoint_type: EndpointType
    input: Any
    output: Any
    max_attempts: int
    duration_ms: int | None


@dataclass(frozen=True)
class ExecutionDetail:
    """One execution as ``GET /executions/{id}`` shows it: with its queue position."""

    execution: Execution
    queue_position: int | None  #: 1-based place in the claim order while QUEUED
    #: The definition of its endpoint it is delivered with: its job's "snapshot", or the
    #: endpoint as it is ("current": a retry or redrive asked for it).
    endpoint_version: str = "snapshot"

    @property
    def status(self) -> ExecutionStatus:
        return self.execution.status


@dataclass(frozen=True, kw_only=True)
class Attempt(RowView):
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


@dataclass(frozen=True, kw_only=True)
class LogLine(RowView):
    """One line of an execution's log."""

    log_id: str
    execution_id: str
    attempt_number: int
    level: LogLevel
    message: str
    logged_at: datetime
