"""Execution use cases: read, cancel, attempts, logs, and waiting for a final status.

Every status change here goes through the transition table
(:mod:`chalicelib.domain.statuses`): the cancel UPDATE is guarded by
``sources_of(CANCELLED)`` and, when it changes nothing, the current status is checked
against the table to explain the refusal (409 EXECUTION_NOT_CANCELLABLE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from chalicelib.db.connection import Database, Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.pagination import PageRequest
from chalicelib.domain.statuses import ExecutionStatus, can_transition, sources_of
from chalicelib.errors import ExecutionNotCancellable, ExecutionNotFound, ValidationFailed
from chalicelib.services import keys
from chalicelib.services.callbacks import complete_batches
from chalicelib.services.longpoll import Poller
from chalicelib.services.views import Attempt, Execution, ExecutionDetail, LogLine

V = TypeVar("V")


class HasStatus(Protocol):
    @property
    def status(self) -> ExecutionStatus: ...


CANCEL_MESSAGE = "Execution cancelled by API request."

#: Executions ahead of one that ``queue_position`` counts at most: a position of
#: ``QUEUE_POSITION_MAX_AHEAD + 1`` means at least that many are ahead. Reading a deep
#: backlog to the end would cost its length on every GET /executions/{id}.
QUEUE_POSITION_MAX_AHEAD = 1000


def parse_execution_status(raw: str | None) -> str | None:
    """A ``status`` filter value, or 400 naming the allowed ones."""
    if raw is None:
        return None
    try:
        return ExecutionStatus(raw).value
    except ValueError as exc:
        allowed = ", ".join(s.value for s in ExecutionStatus)
        raise ValidationFailed(f"status must be one of {allowed}, got {raw!r}.") from exc


def is_final(execution: HasStatus | None) -> bool:
    """True when there is nothing left to wait for (terminal status)."""
    return execution is not None and execution.status.is_terminal


def read_committed(tx: Transaction) -> None:
    """First statement of a cancel: READ COMMITTED, like the worker's finalize, so that a
    batch's completion is decided on a fresh read after its row lock (see
    batches_lock_for_completion); the cancel itself is one guarded UPDATE (CAS)."""
    tx.execute(queries["worker_read_committed"])


def cancel_in(tx: Transaction, execution_id: str) -> None:
    """Move one execution to CANCELLED inside ``tx``, or raise 404 / 409.

    The UPDATE only matches the transition table's sources of CANCELLED; a 0-row result is
    explained by the status it found: already CANCELLED is success (cancel is idempotent),
    RUNNING, SUCCESS or FAILED is 409 EXECUTION_NOT_CANCELLABLE.
    """
    moved = tx.one(
        queries["executions_cancel"],
        execution_id=execution_id,
        sources=sources_of(ExecutionStatus.CANCELLED),
        message=CANCEL_MESSAGE,
    )
    if moved is not None:
        if moved["batch_id"] is not None:  # it may have been the batch's last open child
            complete_batches(tx, [moved["batch_id"]], datetime.now(UTC))
        keys.changed(tx, keys.keyed_ids([moved]))  # a keyed one settles its key
        return
    current = tx.scalar(queries["executions_status"], execution_id=execution_id)
    if current is None:
        raise ExecutionNotFound(f"Execution with ID '{execution_id}' does not exist.")
    if current == ExecutionStatus.CANCELLED:
        return
    if not can_transition(current, ExecutionStatus.CANCELLED):
        raise ExecutionNotCancellable(
            f"Execution '{execution_id}' is {current}: only PENDING, QUEUED or RETRYING "
            "executions can be cancelled."
        )
    # The table allows it but the guarded UPDATE did not match: the row changed between the
    # two statements (a worker claimed it, then it went back to RETRYING).
    raise ExecutionNotCancellable(f"Execution '{execution_id}' changed while cancelling.")


def detail_in(tx: Transaction, execution_id: str) -> ExecutionDetail:
    """One execution with its queue position while QUEUED, read in ``tx`` (404 if unknown)."""
    row = tx.one(queries["executions_get"], execution_id=execution_id)
    if row is None:
        raise ExecutionNotFound(f"Execution with ID '{execution_id}' does not exist.")
    execution = Execution.from_row(row)
    position = None
    # One waiting behind its ordering key's head has no place in the claim order yet.
    if execution.status == ExecutionStatus.QUEUED and not row["ordering_wait"]:
        position = tx.scalar(
            queries["executions_queue_position"],
            run_at=execution.run_at,
            execution_id=execution_id,
            max_ahead=QUEUE_POSITION_MAX_AHEAD,
        )
    return ExecutionDetail(execution, position, row["endpoint_version"])


@dataclass(frozen=True)
class ExecutionService:
    """Reads and cancels executions; ``poller`` waits for final statuses."""

    db: Database
    poller: Poller = field(default_factory=Poller)

    def _get_in(self, tx: Transaction, execution_id: str) -> ExecutionDetail:
        return detail_in(tx, execution_id)

    def get(self, execution_id: str, *, wait: int | None = None) -> ExecutionDetail:
        """One execution with its queue position; with ``wait``, long-poll for a final one."""

        def fetch() -> ExecutionDetail:
            return self.db.transaction(lambda tx: self._get_in(tx, execution_id), name="exec_get")

        if not wait:
            return fetch()
        return self.poller.wait(fetch, is_final, wait)

    def cancel(self, execution_id: str) -> ExecutionDetail:
        """Cancel if PENDING / QUEUED / RETRYING; already CANCELLED is answered as it is.

        409 EXECUTION_NOT_CANCELLABLE when RUNNING, SUCCESS or FAILED. Returns the execution.
        """

        def work(tx: Transaction) -> ExecutionDetail:
            read_committed(tx)
            cancel_in(tx, execution_id)
            return self._get_in(tx, execution_id)

        return self.db.transaction(work, name="exec_cancel")

    def _require(self, tx: Transaction, execution_id: str) -> None:
        if tx.scalar(queries["executions_status"], execution_id=execution_id) is None:
            raise ExecutionNotFound(f"Execution with ID '{execution_id}' does not exist.")

    def _page(
        self, query: str, execution_id: str, page: PageRequest, view: Callable[[Row], V]
    ) -> list[V]:
        def work(tx: Transaction) -> list[V]:
            self._require(tx, execution_id)
            rows = tx.run(queries[query], execution_id=execution_id, **page.params())
            return [view(row) for row in rows]

        return self.db.transaction(work, name=query)

    def attempts(self, execution_id: str, page: PageRequest) -> list[Attempt]:
        """Attempts by attempt_number ascending (404 for an unknown execution)."""
        return self._page("executions_attempts_page", execution_id, page, Attempt.from_row)

    def logs(self, execution_id: str, page: PageRequest) -> list[LogLine]:
        """Log lines oldest first (404 for an unknown execution)."""
        return self._page("executions_logs_page", execution_id, page, LogLine.from_row)
