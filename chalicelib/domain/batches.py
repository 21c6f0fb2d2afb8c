"""Batches, pure: the ``POST /jobs/batch`` envelope and a batch's progress.

A batch's progress is derived from its children's execution statuses (counted on an
index, :file:`migrations/005_batches.sql`); this module turns those counts into the status
the API shows: RUNNING while any child execution is not terminal, then COMPLETED.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from chalicelib.domain.statuses import TERMINAL_STATUSES, ExecutionStatus
from chalicelib.errors import PayloadTooLarge, ValidationFailed

#: Most job requests one POST /jobs/batch may carry.
MAX_BATCH_JOBS = 1000
BATCH_FIELDS = frozenset({"jobs", "atomic", "on_complete"})


class BatchStatus(StrEnum):
    """Where a batch stands."""

    RUNNING = "RUNNING"  #: some child execution is not terminal yet
    COMPLETED = "COMPLETED"  #: every child execution is terminal


@dataclass(frozen=True, kw_only=True)
class BatchRequest:
    """A validated batch envelope; its items are validated one by one later."""

    items: list[Any]
    atomic: bool
    on_complete: str | None


def parse_batch_request(body: Mapping[str, Any]) -> BatchRequest:
    """400 for a malformed envelope; 413 naming the limit for more than MAX_BATCH_JOBS."""
    unknown = sorted(set(body) - BATCH_FIELDS)
    if unknown:
        raise ValidationFailed(f"Unknown field(s) for a batch: {', '.join(unknown)}.")
    items = body.get("jobs")
    if not isinstance(items, list) or not items:
        raise ValidationFailed("Field 'jobs' must be a non-empty array of job requests.")
    if len(items) > MAX_BATCH_JOBS:
        raise PayloadTooLarge(
            f"A batch holds at most {MAX_BATCH_JOBS} jobs; this one has {len(items)}."
        )
    _refuse_topics(items)
    atomic = body.get("atomic", False)
    if not isinstance(atomic, bool):
        raise ValidationFailed("Field 'atomic' must be a boolean.")
    on_complete = body.get("on_complete")
    if on_complete is not None and (not isinstance(on_complete, str) or not on_complete.strip()):
        raise ValidationFailed("Field 'on_complete' must be an endpoint name.")
    return BatchRequest(items=items, atomic=atomic, on_complete=on_complete)


def _refuse_topics(items: list[Any]) -> None:
    """400 naming the first item that carries ``topic``: a batch's items are one job each
    (its counts and its on_complete are per job); a fan-out is POST /jobs with ``topic``."""
    for index, item in enumerate(items):
        if isinstance(item, dict) and "topic" in item:
            raise ValidationFailed(
                f"Item {index} of 'jobs': field 'topic' is not accepted in a batch; create a "
                'topic\'s jobs with POST /jobs {"topic": ...}.'
            )


@dataclass(frozen=True, kw_only=True)
class BatchProgress:
    """Counts of a batch's child executions by status, and what they add up to."""

    counts: dict[str, int]
    status: BatchStatus
    completed_at: datetime | None


def progress(
    counts: Mapping[str, int], *, last_completed_at: datetime | None, created_at: datetime
) -> BatchProgress:
    """RUNNING while a child is not terminal; else COMPLETED at the last child's end (the
    batch's creation when it has no execution, e.g. only invalid items or CRON jobs)."""
    full = {status.value: int(counts.get(status.value, 0)) for status in ExecutionStatus}
    open_ = sum(n for status, n in full.items() if ExecutionStatus(status) not in TERMINAL_STATUSES)
    if open_:
        return BatchProgress(counts=full, status=BatchStatus.RUNNING, completed_at=None)
    return BatchProgress(
        counts=full, status=BatchStatus.COMPLETED, completed_at=last_completed_at or created_at
    )
