"""The queue between the delivery loop and the finalizer: :class:`FinishedQueue`."""

from __future__ import annotations

import queue

from chalicelib.worker.models import FinishedExecution

#: The most results one finalize batch writes.
MAX_BATCH = 500


class FinishedQueue:
    """Finished executions waiting for the finalizer's writers (any thread puts; a
    ``queue.SimpleQueue``, in C: the delivery loop puts every finished execution on it,
    and ``queue.Queue``'s put takes a lock and notifies a condition in Python each time)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[FinishedExecution | None] = queue.SimpleQueue()

    def submit(self, finished: FinishedExecution) -> None:
        self._queue.put(finished)

    def next_batch(self) -> list[FinishedExecution] | None:
        """Wait for the next batch: what is ready, up to :data:`MAX_BATCH`; None once
        stopped (:meth:`stop`: the marker stays for the other writers)."""
        first = self._queue.get()
        if first is None:
            self._queue.put(None)  # for the other writers
            return None
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # stop after this batch
                break
            batch.append(item)
        return batch

    def stop(self) -> None:
        """Writers stop after what is queued."""
        self._queue.put(None)

    def reopen(self) -> None:
        """Drop the stop marker (after the writers stopped), so a restart's writers run."""
        fresh: queue.SimpleQueue[FinishedExecution | None] = queue.SimpleQueue()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                fresh.put(item)
        self._queue = fresh
