"""Completion callbacks and batch completion, in the transaction that ends executions.

When an execution ends SUCCESS (FAILED), its job's ``on_success`` (``on_failure``)
endpoint gets a new IMMEDIATE job whose input reports the execution::

    {"execution_id", "job_id", "endpoint", "status", "attempt_count",
     "output" (SUCCESS) or "error" (FAILED: the last attempt's), "batch_id"}

Its idempotency key is ``callback:<execution_id>:<attempt_count>``: the unique index on
(endpoint, key) lets exactly one callback exist per end of an execution, even if a
reclaimed execution were finalized twice. An execution ends more than once only when an
operator retries or redrives it (FAILED -> QUEUED, :mod:`chalicelib.services.dead_letters`):
attempt numbering continues, so its new end has a new attempt_count and its callback
(``on_success``, or ``on_failure`` again) reports that end.

When the last child execution of a batch with ``on_complete`` ends, that endpoint gets
one IMMEDIATE job keyed ``batch:<batch_id>`` whose input is the batch's summary
(``batch_id``, ``status``, ``total``, ``counts``, ``completed_at``): once per batch, at
its first completion (a batch reopened by a retried member does not fire it again; the
member's own callbacks report its new end). Callback jobs are ordinary jobs (retries,
attempts, logs) created by the shared path (:func:`chalicelib.services.jobs.create.create_jobs`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from chalicelib.db.connection import Row, Transaction
from chalicelib.db.queries import queries
from chalicelib.domain.batches import BatchProgress, BatchStatus, progress
from chalicelib.domain.jobs import JobRequest, batch_completion_key, callback_key
from chalicelib.domain.loops import fault_reason
from chalicelib.domain.statuses import ExecutionStatus, TriggerType
from chalicelib.domain.timefmt import iso
from chalicelib.errors import DatabaseError, TaskExecutorError
from chalicelib.services.jobs.create import Outcome, create_jobs
from chalicelib.services.jobs.rows import NewJob

log = logging.getLogger(__name__)


def follow_up(
    tx: Transaction,
    *,
    execution_ids: Iterable[str],
    batch_ids: Iterable[str],
    now: datetime | None = None,
) -> None:
    """Create what follows executions that ``tx`` just ended: the callbacks of
    ``execution_ids`` and the ``on_complete`` of the batches whose last child ended."""
    now = now or datetime.now(UTC)
    ids = sorted(set(execution_ids))
    if ids:
        _execution_callbacks(tx, ids, now)
    batches = sorted(set(batch_ids))
    if batches:
        complete_batches(tx, batches, now)


def callback_input(row: Row) -> dict[str, Any]:
    """The documented input of a callback job, from a ``callbacks_sources`` row."""
    report: dict[str, Any] = {
        "execution_id": row["execution_id"],
        "job_id": row["job_id"],
        "endpoint": row["endpoint"],
        "status": row["status"],
        "attempt_count": row["attempt_count"],
    }
    if row["status"] == ExecutionStatus.SUCCESS:
        report["output"] = row["output"]
    else:
        report["error"] = row["error"]
    report["batch_id"] = row["batch_id"]
    return report


def _execution_callbacks(tx: Transaction, ids: list[str], now: datetime) -> None:
    rows = [r for r in tx.run(queries["callbacks_sources"], execution_ids=ids) if r["target"]]
    items = [
        NewJob(
            JobRequest(
                endpoint=row["target"],
                trigger=TriggerType.IMMEDIATE,
                idempotency_key=callback_key(row["execution_id"], int(row["attempt_count"])),
                input=callback_input(row),
            ),
            parent_execution_id=row["execution_id"],
            depth=int(row["callback_depth"]) + 1,
            system=True,
        )
        for row in rows
    ]
    outcomes = create_isolated(tx, items, now)
    lines = [_log_line(row["execution_id"], o) for row, o in zip(rows, outcomes, strict=True)]
    if lines:
        tx.execute(queries["callbacks_log"], lines=json.dumps(lines))


def create_isolated(tx: Transaction, items: Sequence[NewJob], now: datetime) -> list[Outcome]:
    """:func:`create_jobs`, but an item the code cannot build a job from (its endpoint's
    row holds a value of an unexpected shape) is answered with an error instead of raising
    for the whole transaction: the execution that ended (or the batch that completed) is
    recorded anyway, and the log line of its callback says why there is none. A
    :class:`DatabaseError` still raises: the transaction cannot go on after it, and the
    caller (the finalizer, the reclaimer) isolates the row that caused it.
    """
    try:
        return create_jobs(tx, items, now=now)
    except DatabaseError:
        raise
    except Exception as exc:
        if len(items) == 1:
            reason = fault_reason(exc)
            log.error("callback job not created: %s", reason, exc_info=exc)
            return [Outcome(error=TaskExecutorError(f"callback endpoint unusable ({reason})"))]
    # Checks write nothing before the statement that inserts the jobs, so trying the items
    # one by one in the same transaction is safe.
    return [outcome for item in items for outcome in create_isolated(tx, [item], now)]


def _log_line(execution_id: str, outcome: Outcome) -> dict[str, str]:
    if outcome.error is not None:
        return {
            "execution_id": execution_id,
            "level": "WARN",
            "message": f"No callback job: {outcome.error.message}",
        }
    assert outcome.view is not None
    job = outcome.view.job
    verb = "created" if outcome.created else "already exists"
    return {
        "execution_id": execution_id,
        "level": "INFO",
        "message": f"Callback job {job.job_id} on endpoint '{job.endpoint}' {verb}.",
    }


def progress_in(tx: Transaction, batch: Row) -> BatchProgress:
    """A batch's progress, counted on idx_executions_batch."""
    rows = tx.run(queries["batches_progress"], batch_id=batch["batch_id"])
    ends = [r["last_completed_at"] for r in rows if r["last_completed_at"] is not None]
    return progress(
        {r["status"]: int(r["n"]) for r in rows},
        last_completed_at=max(ends) if ends else None,
        created_at=batch["created_at"],
    )


def batch_summary(batch: Row, state: BatchProgress) -> dict[str, Any]:
    """The input of a batch's on_complete job."""
    return {
        "batch_id": batch["batch_id"],
        "status": state.status.value,
        "total": int(batch["total"]),
        "counts": state.counts,
        "completed_at": iso(state.completed_at),
    }


def complete_batches(tx: Transaction, batch_ids: Sequence[str], now: datetime) -> None:
    """Fire ``on_complete`` for each of these batches that has just completed.

    Locks the batch rows first (batches_lock_for_completion says why), then counts: the
    last of two transactions ending a batch's last children sees the other's commit. The
    key ``batch:<id>`` keeps it to one job if two of them see the batch complete.
    """
    items = []
    for batch in tx.run(queries["batches_lock_for_completion"], batch_ids=list(batch_ids)):
        state = progress_in(tx, batch)
        if state.status is not BatchStatus.COMPLETED:
            continue
        request = JobRequest(
            endpoint=batch["on_complete"],
            trigger=TriggerType.IMMEDIATE,
            idempotency_key=batch_completion_key(batch["batch_id"]),
            input=batch_summary(batch, state),
        )
        items.append(NewJob(request, depth=1, system=True))
    for outcome in create_isolated(tx, items, now):
        if outcome.error is not None:
            log.warning("batch on_complete job not created: %s", outcome.error.message)
