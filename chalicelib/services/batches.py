"""Batch use cases: create up to 1,000 jobs in one transaction, progress, jobs, cancel.

Each item of ``POST /jobs/batch`` goes through the same checks and insert as ``POST /jobs``
(:func:`chalicelib.services.jobs.create.create_jobs`); all items are written with one
multi-row INSERT per table. ``atomic`` turns any invalid item into a 422 for the whole
request, with nothing written (the transaction rolls back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from chalicelib.db import notify
from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.batches import BatchProgress, BatchRequest, parse_batch_request
from chalicelib.domain.jobs import parse_job_request
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.payload_specs import request_budget
from chalicelib.domain.statuses import ExecutionStatus, TriggerType, sources_of
from chalicelib.domain.trace_context import TraceContext
from chalicelib.errors import (
    BatchNotFound,
    BatchRejected,
    TaskExecutorError,
    ValidationFailed,
)
from chalicelib.services import keys
from chalicelib.services.callbacks import complete_batches, progress_in
from chalicelib.services.executions import read_committed
from chalicelib.services.jobs.create import (
    CheckedInputs,
    Endpoints,
    Outcome,
    Wake,
    check_callbacks,
    check_inputs,
    create_jobs,
    views_of,
    wake_for,
)
from chalicelib.services.jobs.rows import JobView, NewJob, new_id

CANCEL_MESSAGE = "Execution cancelled with its batch (POST /batches/{id}/cancel)."


@dataclass(frozen=True, kw_only=True)
class Batch:
    """A batch as ``GET /batches/{id}`` shows it: what it was created with, and progress."""

    batch_id: str
    total: int
    on_complete: str | None
    created_at: datetime
    progress: BatchProgress

    @classmethod
    def from_row(cls, row: Row, progress: BatchProgress) -> Batch:
        return cls(
            batch_id=row["batch_id"],
            total=int(row["total"]),
            on_complete=row["on_complete"],
            created_at=row["created_at"],
            progress=progress,
        )


@dataclass(frozen=True)
class BatchCreated:
    batch_id: str
    items: list[Outcome]  #: one per job request, in order


@dataclass(frozen=True)
class BatchCancelled:
    batch: Batch
    cancelled: int  #: child executions moved to CANCELLED by this request
    retired: int  #: CRON jobs of the batch retired by this request


def _parse_item(
    item: Any, now: datetime, batch_id: str, trace: TraceContext | None
) -> NewJob | TaskExecutorError:
    if not isinstance(item, dict):
        return ValidationFailed("A job request must be a JSON object.")
    try:
        return NewJob(parse_job_request(item, now=now, trace=trace), batch_id=batch_id)
    except TaskExecutorError as exc:
        return exc


def item_errors(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """The invalid items of an atomic batch: index, status and error of each."""
    return [
        {
            "index": index,
            "status": o.error.status,
            "error": {"code": o.error.code, "message": o.error.message},
        }
        for index, o in enumerate(outcomes)
        if o.error is not None
    ]


@dataclass(frozen=True)
class BatchService:
    """Creates and manages batches; ``clock`` is UTC-aware "now" (injected for tests)."""

    db: Database
    clock: Callable[[], datetime]
    wakeup_notify: str = notify.AUTO

    def create(self, body: Mapping[str, Any], *, trace: TraceContext | None = None) -> BatchCreated:
        """POST /jobs/batch: one transaction, whatever the number of items. ``trace``: the
        request's trace context, kept by every item without one in its own headers."""
        request = parse_batch_request(body)
        batch_id = new_id("batch_")
        now = self.clock()
        items = [_parse_item(item, now, batch_id, trace) for item in request.items]
        wake = wake_for(self.db, self.wakeup_notify, (i.request for i in items if _new(i)))
        with request_budget():  # one budget for every item, spent before the transaction
            checked = check_inputs(self.db, items)
        result = self.db.transaction(
            lambda tx: self._create_in(tx, request, batch_id, items, now, checked, wake),
            name="batch_create",
        )
        wake.after_commit(result.items)
        return result

    def _create_in(
        self,
        tx: Transaction,
        request: BatchRequest,
        batch_id: str,
        items: list[NewJob | TaskExecutorError],
        now: datetime,
        checked: CheckedInputs,
        wake: Wake,
    ) -> BatchCreated:
        if request.on_complete is not None:
            check_callbacks(Endpoints(tx), [request.on_complete], depth=0)
        outcomes = create_jobs(tx, items, now=now, checked=checked, wake=wake)
        if request.atomic and any(o.error is not None for o in outcomes):
            errors = item_errors(outcomes)
            raise BatchRejected(
                f"{len(errors)} of {len(outcomes)} job requests are invalid; nothing was "
                "created (atomic batch).",
                items=errors,
            )
        total = sum(1 for o in outcomes if o.created)
        tx.run(
            queries["batches_insert"],
            batch_id=batch_id,
            total=total,
            on_complete=request.on_complete,
        )
        if request.on_complete is not None and not any(_created_one_shot(o) for o in outcomes):
            # No child execution will ever end and fire it (only CRON items, or only keys
            # already taken): the batch is COMPLETED now, so its on_complete fires now.
            complete_batches(tx, [batch_id], now)
        return BatchCreated(batch_id, outcomes)

    def get(self, batch_id: str) -> Batch:
        """GET /batches/{id}: total, counts by execution status, RUNNING or COMPLETED."""
        return self.db.transaction(lambda tx: _batch_in(tx, batch_id), name="batch_get")

    def jobs_page(self, batch_id: str, status: str | None, page: PageRequest) -> list[JobView]:
        """GET /batches/{id}/jobs: a keyset page of the batch's jobs, newest first."""

        def work(tx: Transaction) -> list[JobView]:
            _get_row(tx, batch_id)
            rows = tx.run(
                queries["batches_jobs_page"], batch_id=batch_id, status=status, **page.params()
            )
            return views_of(tx, rows)

        return self.db.transaction(work, name="batch_jobs")

    def cancel(self, batch_id: str) -> BatchCancelled:
        """POST /batches/{id}/cancel: every cancellable child at once; idempotent."""
        return self.db.transaction(lambda tx: self._cancel_in(tx, batch_id), name="batch_cancel")

    def _cancel_in(self, tx: Transaction, batch_id: str) -> BatchCancelled:
        # READ COMMITTED like the worker's finalize, whose protocol for on_complete this
        # shares: children updated first, then the batch row locked, then counted afresh.
        read_committed(tx)
        _get_row(tx, batch_id)
        moved = tx.one(
            queries["batches_cancel"],
            batch_id=batch_id,
            sources=sources_of(ExecutionStatus.CANCELLED),
            message=CANCEL_MESSAGE,
        )
        assert moved is not None
        keys.changed(tx, moved["keyed"])  # keyed children settle their keys
        if moved["cancelled"]:
            complete_batches(tx, [batch_id], self.clock())
        batch = _batch_in(tx, batch_id)
        return BatchCancelled(batch, int(moved["cancelled"]), int(moved["retired"]))


def _created_one_shot(outcome: Outcome) -> bool:
    view = outcome.view
    return outcome.created and view is not None and view.job.trigger_type != TriggerType.CRON


def _new(item: NewJob | TaskExecutorError) -> TypeGuard[NewJob]:
    return isinstance(item, NewJob)


def _get_row(tx: Transaction, batch_id: str) -> Row:
    row = tx.one(queries["batches_get"], batch_id=batch_id)
    if row is None:
        raise BatchNotFound(f"Batch with ID '{batch_id}' does not exist.")
    return row


def _batch_in(tx: Transaction, batch_id: str) -> Batch:
    row = _get_row(tx, batch_id)
    return Batch.from_row(row, progress_in(tx, row))
