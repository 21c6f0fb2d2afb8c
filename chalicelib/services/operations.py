"""Bulk operations: a retry, cancel or delete over the executions a filter matches, worked
through in pages in the background, with its progress.

Reading order: :meth:`OperationService.create` (``POST /executions/bulk``: the row, then
its first page at once), :meth:`OperationService.advance` (one page: what the API's first
page and the scheduler's loop, :mod:`chalicelib.scheduler.bulk`, both run), then the three
page actions. One page is one transaction: the operation row locked, the page read, its
executions acted on, the cursor and counters moved. A crash rolls all of it back, so
nothing is lost or counted twice, and no transaction grows with the set.

The set is fixed at creation: a page reads, with ``GET /executions``' own statement, the
executions matching the filter and created before the operation, from the cursor on,
newest first by (created_at, execution_id) (:meth:`BulkFilter.execution_filter`). Each
execution is read by one page at most (the cursor only moves on); one created after the
operation is never read; one whose status no longer matches when its page is read is not
matched.

Each page acts by id with its single-execution route's SQL semantics (the same guards,
writes and log lines, ``operations.sql``), so a bulk action is N single actions:

* retry: FAILED -> QUEUED with a new attempt budget, only where the endpoint is live, then
  the workers are woken (:mod:`chalicelib.services.dead_letters`);
* cancel: PENDING, QUEUED or RETRYING -> CANCELLED, in READ COMMITTED like a single cancel
  (a worker that claimed a row first keeps it), then completed batches fire
  (:mod:`chalicelib.services.executions`);
* delete: SUCCESS, FAILED or CANCELLED executions removed with their attempts and logs,
  and a one-shot job left without an execution with them.

An execution the action does not apply to is refused: counted, never an error.

:meth:`OperationService.count` (``POST /executions/bulk/count``) says beforehand how many
executions a filter matches, reading at most :data:`~chalicelib.domain.operations.COUNT_LIMIT`
of them (one more says "more than that") with the listing's filters and indexes, the
executions' keys only (``operations_count``).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chalicelib import wakeup
from chalicelib.db import notify
from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.faults import is_transient
from chalicelib.db.queries import queries
from chalicelib.domain.operations import (
    COUNT_LIMIT,
    BulkAction,
    BulkFilter,
    BulkRequest,
    OperationState,
)
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus, requeue_sources, sources_of
from chalicelib.errors import OperationNotFound, OperationNotRunning, TaskExecutorError
from chalicelib.services import keys
from chalicelib.services.callbacks import complete_batches
from chalicelib.services.dead_letters import filtered_query, list_query
from chalicelib.services.executions import read_committed
from chalicelib.services.views import RowView

log = logging.getLogger(__name__)

#: Executions one page reads and acts on, by default (``TE_BULK_PAGE_SIZE``).
PAGE_SIZE = 100


@dataclass(frozen=True, kw_only=True)
class Operation(RowView):
    """A bulk operation and its progress (``matched = done + refused``)."""

    operation_id: str
    action: BulkAction
    filter: dict[str, Any]
    state: OperationState
    matched: int
    done: int
    refused: int
    after_ts: datetime | None
    after_id: str | None
    error: str | None
    created_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class BulkCount:
    """How many executions a filter matches now: ``matched`` up to ``limit``; ``more``:
    more than ``limit`` match (``matched`` is then ``limit``)."""

    matched: int
    more: bool
    limit: int


@dataclass(frozen=True)
class Advanced:
    """One page's outcome: the operation after it, and the executions the page read."""

    operation: Operation
    read: int


@dataclass(frozen=True)
class OperationService:
    """Creates, reads, aborts and advances bulk operations; ``wakeup_notify`` is
    ``TE_WAKEUP_NOTIFY``, ``page_size`` ``TE_BULK_PAGE_SIZE``."""

    db: Database
    page_size: int = PAGE_SIZE
    wakeup_notify: str = notify.AUTO

    def create(self, request: BulkRequest) -> Operation:
        """A RUNNING operation over the request's set, with its first page done: a small
        set ends here (DONE), a larger one goes on in the scheduler's loop. A page that
        cannot run now (the database busy or away) is left to the loop."""
        filter_json = json.dumps(request.filter.to_json())
        row = self.db.transaction(
            lambda tx: tx.one(
                queries["operations_insert"], action=request.action.value, filter=filter_json
            ),
            name="operation_create",
        )
        operation = Operation.from_row(_required(row))
        try:
            advanced = self.advance(operation.operation_id, operation.action)
        except TaskExecutorError as exc:
            if not is_transient(exc):
                raise
            log.warning("operation %s: first page left to the loop: %s", operation, exc)
            return operation
        return operation if advanced is None else advanced.operation

    def count(self, bulk_filter: BulkFilter, limit: int = COUNT_LIMIT) -> BulkCount:
        """How many executions ``bulk_filter`` matches now, counted up to ``limit`` (one
        statement, bounded by ``limit`` whatever the history)."""
        page = PageRequest(limit)
        query, params = filtered_query("operations_count", bulk_filter.execution_filter(), page)
        counted = int(self.db.run(query, **params)[0]["matched"])
        return BulkCount(matched=min(counted, limit), more=counted > limit, limit=limit)

    def get(self, operation_id: str) -> Operation:
        """The operation (404 OPERATION_NOT_FOUND)."""
        return self.db.transaction(lambda tx: _get_in(tx, operation_id), name="operation_get")

    def abort(self, operation_id: str) -> Operation:
        """Stop a RUNNING operation (ABORTED): no page commits after this returns (a page
        in flight holds the row, and this waits for it). Already ABORTED answers as it is;
        DONE or FAILED is 409 OPERATION_NOT_RUNNING."""

        def work(tx: Transaction) -> Operation:
            row = tx.one(
                queries["operations_end"],
                operation_id=operation_id,
                state=OperationState.ABORTED.value,
                error=None,
            )
            if row is not None:
                return Operation.from_row(row)
            current = _get_in(tx, operation_id)
            if current.state is OperationState.ABORTED:
                return current
            raise OperationNotRunning(
                f"Operation '{operation_id}' is {current.state}: only a RUNNING operation "
                "can be aborted."
            )

        return self.db.transaction(work, name="operation_abort")

    def next_running(self) -> tuple[str, BulkAction] | None:
        """The RUNNING operation whose turn it is (it advanced longest ago), if any."""
        rows = self.db.run(queries["operations_next_running"])
        return (rows[0]["operation_id"], BulkAction(rows[0]["action"])) if rows else None

    def advance(self, operation_id: str, action: BulkAction) -> Advanced | None:
        """One page of the operation, in one transaction; None if it is not RUNNING.

        A failure a retry may fix (the database away or contended) is raised, and the
        page runs again later from the same cursor; any other ends the operation FAILED
        with the error's code, so one that cannot advance does not hold the loop."""
        work = functools.partial(self._page_in, operation_id=operation_id, action=action)
        try:
            advanced = self.db.transaction(work, name="operation_page")
        except Exception as exc:
            if is_transient(exc):
                raise
            log.exception("operation %s: a page failed; the operation is FAILED", operation_id)
            return self._fail(operation_id, exc)
        if advanced is not None and action is BulkAction.RETRY and advanced.read:
            wakeup.notify()  # after COMMIT, as a single retry
        return advanced

    def _page_in(
        self, tx: Transaction, *, operation_id: str, action: BulkAction
    ) -> Advanced | None:
        if action is BulkAction.CANCEL:
            read_committed(tx)  # first statement: the isolation a single cancel runs in
        row = tx.one(queries["operations_lock_running"], operation_id=operation_id)
        if row is None:
            return None
        operation = Operation.from_row(row)
        rows = self._read_page(tx, operation)
        page = rows[: self.page_size]
        ids = [r["execution_id"] for r in page]
        done = self._act(tx, operation, ids) if ids else 0
        recorded = tx.one(
            queries["operations_record_page"],
            operation_id=operation_id,
            matched=len(page),
            done=done,
            after_ts=page[-1]["created_at"] if page else None,
            after_id=page[-1]["execution_id"] if page else None,
            last=len(rows) <= self.page_size,
        )
        return Advanced(Operation.from_row(_required(recorded)), len(page))

    def _read_page(self, tx: Transaction, operation: Operation) -> list[Row]:
        """Up to ``page_size + 1`` executions of the set after the cursor (the extra one
        says whether another page follows), as GET /executions lists them."""
        filters = BulkFilter.from_json(operation.filter).execution_filter(operation.created_at)
        request = PageRequest(self.page_size, operation.after_ts, operation.after_id)
        query, params = list_query(filters, request)
        return tx.run(query, **params)

    def _act(self, tx: Transaction, operation: Operation, ids: list[str]) -> int:
        """The page's action on ``ids``; how many it applied to (the rest are refused)."""
        if operation.action is BulkAction.RETRY:
            return self._retry_page(tx, operation.operation_id, ids)
        if operation.action is BulkAction.CANCEL:
            return _cancel_page(tx, operation.operation_id, ids)
        return int(tx.scalar(queries["operations_delete_page"], ids=ids))

    def _retry_page(self, tx: Transaction, operation_id: str, ids: list[str]) -> int:
        row = tx.one(
            queries["operations_retry_page"],
            ids=ids,
            sources=requeue_sources(),
            endpoint_version="snapshot",  # as a single retry's default
            message=f"Execution requeued by bulk operation {operation_id}.",
        )
        assert row is not None
        moved = int(row["moved"])
        keys.changed(tx, [], revived=row["keyed"])
        if moved:
            notify.publish(tx, self.db, self.wakeup_notify)
        return moved

    def _fail(self, operation_id: str, exc: BaseException) -> Advanced | None:
        code = exc.code if isinstance(exc, TaskExecutorError) else "INTERNAL_ERROR"
        error = f"A page failed ({code}); the scheduler's log has the details."
        row = self.db.transaction(
            lambda tx: tx.one(
                queries["operations_end"],
                operation_id=operation_id,
                state=OperationState.FAILED.value,
                error=error,
            ),
            name="operation_fail",
        )
        return None if row is None else Advanced(Operation.from_row(row), 0)


def _cancel_page(tx: Transaction, operation_id: str, ids: list[str]) -> int:
    moved = tx.run(
        queries["operations_cancel_page"],
        ids=ids,
        sources=sources_of(ExecutionStatus.CANCELLED),
        message=f"Execution cancelled by bulk operation {operation_id}.",
    )
    keys.changed(tx, keys.keyed_ids(moved))  # keyed cancels settle their keys
    batches: Sequence[str] = sorted({r["batch_id"] for r in moved if r["batch_id"] is not None})
    if batches:  # a cancel may be a batch's last end (on_complete), as a single cancel
        complete_batches(tx, batches, datetime.now(UTC))
    return len(moved)


def _get_in(tx: Transaction, operation_id: str) -> Operation:
    row = tx.one(queries["operations_get"], operation_id=operation_id)
    if row is None:
        raise OperationNotFound(f"Operation with ID '{operation_id}' does not exist.")
    return Operation.from_row(row)


def _required(row: Row | None) -> Row:
    if row is None:  # an INSERT ... RETURNING, or an UPDATE of a row this transaction locked
        raise RuntimeError("the statement returned no row")
    return row
