"""Dead letters: the listing across jobs, retry of one FAILED execution, redrive of many.

Retry and redrive move FAILED -> QUEUED (the transition table's terminal source of QUEUED,
:func:`chalicelib.domain.statuses.requeue_sources`) with a new attempt budget: the
execution keeps its attempts and attempt_count, so numbering continues, and max_attempts
grows by its job's retry policy. What follows a requeued execution:

* its one-shot job is ACTIVE again (``job_states`` derives it from the execution);
* its batch's progress counts it as QUEUED, then as its new end (counted from statuses,
  nothing to correct). A batch's ``on_complete`` fires once, at its first completion
  (key ``batch:<id>``), and is not repeated when a retried member ends again;
* its config is resolved afresh at its next attempt (a new budget is a new run);
* its callbacks report its new end: a callback job's key is
  ``callback:<execution_id>:<attempt_count>``, one per end, so a retried execution that
  succeeds calls ``on_success`` even though ``on_failure`` already ran for its first end.

Both commit before the worker is woken (PostgreSQL NOTIFY in the transaction, then the
in-process wake-up), as creating an IMMEDIATE job does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from chalicelib import wakeup
from chalicelib.db import notify
from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import Query, queries
from chalicelib.db.shapes import shaped
from chalicelib.domain.dead_letters import (
    REDRIVE_BATCH,
    REDRIVE_MAX_PER_REQUEST,
    ExecutionFilter,
    RedriveRequest,
)
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus, requeue_sources
from chalicelib.errors import EndpointNotFound, ExecutionNotFound, ExecutionNotRetryable
from chalicelib.services import keys
from chalicelib.services.executions import detail_in
from chalicelib.services.views import Execution, ExecutionDetail

RETRY_MESSAGE = "Execution requeued by POST /executions/{id}/retry."
REDRIVE_MESSAGE = "Execution requeued by a redrive of its endpoint."


@dataclass(frozen=True, kw_only=True)
class ListedExecution(Execution):
    """An execution as ``GET /executions`` lists it: with its last attempt's error (as
    recorded: redacted of secret values by the worker, bounded)."""

    error: Any

    @property
    def error_type(self) -> str | None:
        return self.error.get("type") if isinstance(self.error, dict) else None

    @property
    def error_message(self) -> str | None:
        return self.error.get("message") if isinstance(self.error, dict) else None


@dataclass(frozen=True)
class RedriveResult:
    requeued: int  #: executions moved FAILED -> QUEUED by this request
    more: bool  #: matching dead letters remain (the per-request bound was reached)


@dataclass(frozen=True)
class DeadLetterService:
    """Lists, retries and redrives; ``wakeup_notify`` is ``TE_WAKEUP_NOTIFY``."""

    db: Database
    wakeup_notify: str = notify.AUTO

    def list(self, filters: ExecutionFilter, page: PageRequest) -> list[ListedExecution]:
        """GET /executions: newest first (created_at, execution_id), up to limit + 1."""
        query, params = list_query(filters, page)
        return [ListedExecution.from_row(row) for row in self.db.run(query, **params)]

    def retry(self, execution_id: str, endpoint_version: str = "snapshot") -> ExecutionDetail:
        """POST /executions/{id}/retry: FAILED -> QUEUED with a new attempt budget, to be
        delivered with its job's endpoint snapshot or (``"current"``) the endpoint as it is.

        404 EXECUTION_NOT_FOUND; 409 EXECUTION_NOT_RETRYABLE unless FAILED (or when its
        endpoint was deleted since: a deleted endpoint takes no new work).
        """
        detail = self.db.transaction(
            lambda tx: self._retry_in(tx, execution_id, endpoint_version), name="retry"
        )
        wakeup.notify()  # after COMMIT
        return detail

    def _retry_in(
        self, tx: Transaction, execution_id: str, endpoint_version: str
    ) -> ExecutionDetail:
        moved = tx.one(
            queries["dead_letters_retry"],
            execution_id=execution_id,
            endpoint_version=endpoint_version,
            sources=requeue_sources(),
            message=RETRY_MESSAGE,
        )
        if moved is None:
            _refuse_retry(tx, execution_id)
        keys.changed(tx, [], revived=keys.keyed_ids([moved] if moved else []))
        notify.publish(tx, self.db, self.wakeup_notify)
        return detail_in(tx, execution_id)

    def redrive(self, endpoint: str, request: RedriveRequest) -> RedriveResult:
        """POST /endpoints/{name}/redrive: requeue the endpoint's matching dead letters,
        :data:`REDRIVE_BATCH` per transaction and at most :data:`REDRIVE_MAX_PER_REQUEST`
        per request. Idempotent: only FAILED rows move, so a repeat finds none."""
        self.db.transaction(lambda tx: _require_endpoint(tx, endpoint), name="redrive_check")
        params = {"endpoint": endpoint, **request.params()}
        version = request.endpoint_version
        requeued = 0
        while requeued < REDRIVE_MAX_PER_REQUEST:
            batch = min(REDRIVE_BATCH, REDRIVE_MAX_PER_REQUEST - requeued)
            moved = self.db.transaction(
                functools.partial(
                    self._redrive_batch, params={**params, "endpoint_version": version}, batch=batch
                ),
                name="redrive_batch",
            )
            requeued += moved
            if moved:
                wakeup.notify()  # after each COMMIT: workers start on the first batch
            if moved < batch:
                return RedriveResult(requeued, more=False)
        more = self.db.run(queries["dead_letters_redrive_more"], **params)[0]["more"]
        return RedriveResult(requeued, more=bool(more))

    def _redrive_batch(self, tx: Transaction, *, params: dict[str, Any], batch: int) -> int:
        row = tx.one(
            queries["dead_letters_redrive_batch"],
            **params,
            batch=batch,
            sources=requeue_sources(),
            message=REDRIVE_MESSAGE,
        )
        assert row is not None
        moved = int(row["requeued"])
        keys.changed(tx, [], revived=row["keyed"])
        if moved:
            notify.publish(tx, self.db, self.wakeup_notify)
        return moved


#: Statuses whose executions never carry a last error type.
_NO_ERROR = frozenset({ExecutionStatus.SUCCESS, ExecutionStatus.PENDING})


def list_query(filters: ExecutionFilter, page: PageRequest) -> tuple[Query, dict[str, Any]]:
    """The statement of GET /executions for these filters, cut to their shape
    (chalicelib/db/shapes.py)."""
    return filtered_query("dead_letters_list", filters, page)


def filtered_query(
    name: str, filters: ExecutionFilter, page: PageRequest
) -> tuple[Query, dict[str, Any]]:
    """Statement ``name`` (or ``name``_of_endpoint, with an endpoint: ranges of
    idx_executions_by_endpoint) for these filters and page, cut to their shape. With an
    error type SUCCESS and PENDING are not asked for: a success's last attempt has no
    error, and a PENDING execution has made no attempt."""
    params = {**filters.params(), **page.params()}
    if filters.error_type is not None:
        params["statuses"] = [s for s in params["statuses"] if s not in _NO_ERROR]
    if filters.endpoint is not None:
        return shaped(queries[f"{name}_of_endpoint"], params)
    return shaped(queries[name], params)


def _require_endpoint(tx: Transaction, name: str) -> None:
    if tx.one(queries["dead_letters_endpoint_live"], name=name) is None:
        raise EndpointNotFound(f"Endpoint '{name}' does not exist.")


def _refuse_retry(tx: Transaction, execution_id: str) -> None:
    """Explain a retry that moved nothing: 404, or 409 naming the reason."""
    current = tx.scalar(queries["executions_status"], execution_id=execution_id)
    if current is None:
        raise ExecutionNotFound(f"Execution with ID '{execution_id}' does not exist.")
    if current not in requeue_sources():
        raise ExecutionNotRetryable(
            f"Execution '{execution_id}' is {current}: only FAILED executions can be retried."
        )
    raise ExecutionNotRetryable(
        f"Execution '{execution_id}' cannot be retried: its endpoint was deleted."
    )
