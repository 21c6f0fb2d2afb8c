"""The queue between the delivery loop and the finalizer's writers: batches, the stop
every writer sees, and a restart after it."""

from __future__ import annotations

from datetime import UTC, datetime

from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
from chalicelib.worker.finished import MAX_BATCH, FinishedQueue
from chalicelib.worker.models import FinishedExecution


def finished(execution_id: str) -> FinishedExecution:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return FinishedExecution(
        execution_id=execution_id,
        endpoint="a",
        attempt_number=1,
        attempt_status=AttemptStatus.SUCCESS,
        next_status=ExecutionStatus.SUCCESS,
        started_at=at,
        completed_at=at,
        duration_ms=1,
    )


def ids(batch: list[FinishedExecution] | None) -> list[str] | None:
    return None if batch is None else [f.execution_id for f in batch]


def test_a_writer_takes_what_is_ready_up_to_a_batch() -> None:
    queue = FinishedQueue()
    for i in range(MAX_BATCH + 2):
        queue.submit(finished(f"e{i}"))
    first = queue.next_batch()
    assert first is not None and len(first) == MAX_BATCH
    assert ids(queue.next_batch()) == [f"e{MAX_BATCH}", f"e{MAX_BATCH + 1}"]


def test_a_stop_ends_the_batch_before_it_and_every_writer_after_it() -> None:
    queue = FinishedQueue()
    queue.submit(finished("e1"))
    queue.stop()
    assert ids(queue.next_batch()) == ["e1"]  # what was queued first is written
    assert queue.next_batch() is None  # the first writer stops ...
    assert queue.next_batch() is None  # ... and the marker stays for the next one


def test_a_reopened_queue_keeps_what_was_left_and_drops_the_stop() -> None:
    """After the writers stopped, a restart's writers find what was put after the stop,
    and no stop marker before it."""
    queue = FinishedQueue()
    queue.stop()
    queue.submit(finished("late"))
    queue.reopen()
    assert ids(queue.next_batch()) == ["late"]
    queue.submit(finished("next"))
    assert ids(queue.next_batch()) == ["next"]
