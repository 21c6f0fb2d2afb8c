"""The finalizer: records attempts and moves executions on, many per transaction.

The last stage of the worker's ring (:mod:`chalicelib.worker.worker`): the delivery loop
puts finished executions (sent, or finished without a send) on a
:class:`~chalicelib.worker.finished.FinishedQueue`, which the finalizer drains; once
written, each is released in the ledger, and the slots a batch frees are refilled inside
the batch's statement or transaction.

A writer thread writes everything that is ready with one record through the worker's store
(:meth:`~chalicelib.worker.store.WorkerStore.record`: on PostgreSQL one
``worker_finalize_batch`` statement), so a burst of N finished deliveries costs one commit
instead of N (the commit rate of the database is the ceiling otherwise). :data:`WRITERS`
writers drain the queue, so a finished execution waits for a free writer rather than for
the whole batch ahead of it: a worker's slot is held until its attempt is recorded, so the
time to record is part of every slot's cycle. Nothing waits on a timer.

A writer also claims, in the statement or transaction that records a batch, as many
executions as there are slots free once it commits: it reserves that room in the worker's
:class:`~chalicelib.worker.room.Room`, passes that plan to the store's record, and hands
back what it took (or, if the commit failed, the bare reservation) through one call,
:meth:`Handback.start`. One durable commit records a batch and refills its slots, so a
worker's slot cycle costs one commit, not a finalize and a claim. On PostgreSQL a batch
nothing follows is recorded and refilled by one statement (worker_record_and_claim); a
batch something follows, or any batch in CockroachDB's configuration, takes a transaction
or records alone.

An execution that ended with a callback, or as the child of a batch, gets what follows
it (:mod:`chalicelib.services.callbacks`) in the same transaction as its final status. An
HTTP attempt answered 410 Gone pauses its endpoint in the transaction that records it
(:mod:`chalicelib.services.auto_pause`); a batch without one sends nothing more. What is
sent for each is :class:`~chalicelib.worker.postgres.PostgresStore`'s; this module keeps
the retries, the isolation of a result that fails and the shutdown.

If the database is down (or contended, or fails the same way for any result) the batch is
retried with backoff until it is written or the worker abandons it at shutdown; abandoned
executions stay RUNNING and the reclaimer returns them (at-least-once delivery).

No result can stop the finalizer: a batch that fails in a way a result can cause (a value
the database refuses, such as a target's answer holding U+0000, or a value the code cannot
handle: :func:`~chalicelib.db.faults.is_row_fault`) is written result by result,
and a result that fails alone is recorded as a FAILED attempt of type ``UNPROCESSABLE``
instead (:meth:`FinishedExecution.unprocessable`: no output, a log line saying why and that
the delivery may have been made), so it shows in the dead-letter view and its slot comes
back. If even that record fails, the result is dropped (logged): the execution stays
RUNNING and its lease runs out, and the reclaimer, which isolates rows of its own, takes
it. The writer threads never die on a result. Their state goes to the worker's
:class:`~chalicelib.runtime.registry.LoopRegistry` as the ``finalize`` loop.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from chalicelib.db.faults import is_row_fault
from chalicelib.domain.loops import fault_reason
from chalicelib.logs import FailureLog
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.worker.finished import FinishedQueue
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.reporting import FINALIZE_LOOP
from chalicelib.worker.room import Room
from chalicelib.worker.store import ClaimPlan, Recording, WorkerStore

log = logging.getLogger(__name__)

#: Writer threads (each with its own connection from the worker's pool).
WRITERS = 2


class Handback(Protocol):
    """Where the finalizer hands back what a refill took (the worker's
    :class:`~chalicelib.worker.starter.Starter`)."""

    def start(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        """The refill's commit ended (``batch`` empty if it failed): give its reservation
        back, hold what it took and start it."""
        ...


class Finalizer:
    """:data:`WRITERS` writer threads draining one :class:`FinishedQueue`, a batch at a
    time (:data:`~chalicelib.worker.finished.MAX_BATCH`)."""

    def __init__(
        self,
        store: WorkerStore,
        ledger: Ledger,
        finished: FinishedQueue,
        *,
        room: Room,
        handback: Handback,
        registry: LoopRegistry | None = None,
    ) -> None:
        """``store``: where batches are recorded and refills claimed (the worker's)."""
        self._store = store
        self._ledger = ledger
        self._finished = finished
        self._room = room
        self._handback = handback
        self._registry = registry or LoopRegistry()
        self._abandon = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._failures = FailureLog(log, "finalize (retrying with backoff)")
        #: Refills that claimed something (diagnostics; tests read it).
        self.refills = 0

    def start(self) -> None:
        with self._lock:
            if not any(thread.is_alive() for thread in self._threads):
                self._abandon.clear()
                self._threads = [
                    threading.Thread(target=self._loop, name=f"te-finalizer-{i}", daemon=True)
                    for i in range(WRITERS)
                ]
                for thread in self._threads:
                    thread.start()

    def stop(self, *, abandon: bool = False) -> None:
        """Stop the writers after what is queued (or at once, dropping it, if ``abandon``)."""
        if abandon:
            self._abandon.set()
        self._finished.stop()  # each writer puts it back for the next one
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            self._finished.reopen()

    def _loop(self) -> None:
        while (batch := self._finished.next_batch()) is not None:
            self._write(batch)

    def _write(self, batch: list[FinishedExecution]) -> None:
        try:
            applied, plan, claimed = self._write_with_retry(batch)
            results = [(f, f.execution_id in applied) for f in batch]
        except Exception as exc:  # one of the results may be the cause
            self._registry.failed(FINALIZE_LOOP, exc)
            log.warning(
                "finalize batch refused; writing its results one by one",
                extra={"count": len(batch), "error": fault_reason(exc)},
            )
            results, plan, claimed = [self._write_alone(f) for f in batch], None, []
        self._ledger.recorded(results)
        if plan is not None:
            self.refills += bool(claimed)
            self._handback.start(plan, claimed)  # after the releases: the slots are free

    def _write_alone(self, finished: FinishedExecution) -> tuple[FinishedExecution, bool]:
        """One result on its own (no refill): (what was recorded, applied). Refused alone,
        it is recorded as UNPROCESSABLE instead; refused again, it is dropped (the
        execution stays RUNNING until the reclaimer takes it)."""
        try:
            applied = self._write_with_retry([finished], refill=False)[0]
            return finished, finished.execution_id in applied
        except Exception as exc:
            substitute = finished.unprocessable(fault_reason(exc))
        try:
            applied = self._write_with_retry([substitute], refill=False)[0]
            return substitute, substitute.execution_id in applied
        except Exception as exc:
            log.error(
                "result not recorded; execution left RUNNING for the reclaimer",
                exc_info=exc,
                extra={"execution_id": finished.execution_id},
            )
            return finished, False

    def _write_with_retry(
        self, batch: list[FinishedExecution], *, refill: bool = True
    ) -> tuple[set[str], ClaimPlan | None, list[ClaimedExecution]]:
        """Write ``batch`` (and, with ``refill``, claim into the slots it frees), retrying
        other failures with back-off until written or abandoned at shutdown; a failure a
        result can cause is raised to :meth:`_write`."""
        recording = Recording.of(batch)
        # A batch sent alone refills only where the store records and claims at once.
        refills = refill and (not recording.alone or self._store.records_with_claim)
        delay = 0.05
        while True:
            plan = self._room.reserve_refill() if refills else None
            try:
                applied, claimed = self._store.record(recording, plan)
            except BaseException as exc:
                if plan is not None:
                    self._handback.start(plan, [])  # nothing claimed: the room goes back
                if is_row_fault(exc):
                    raise  # maybe one result's values: _write finds it
                if self._gives_up(exc, len(batch)):
                    return set(), None, []
                self._abandon.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._failures.succeeded()
            self._registry.running(FINALIZE_LOOP)
            return applied, plan, claimed

    def _gives_up(self, exc: BaseException, count: int) -> bool:
        """After an outage, contention, or a failure no row causes (a permission): every
        result would fail alike, so the batch waits to be retried with back-off, unless the
        worker is shutting down (then its executions stay RUNNING for the reclaimer)."""
        if self._abandon.is_set():
            log.warning(
                "finalize abandoned at shutdown; executions stay RUNNING",
                extra={"count": count, "error": str(exc)},
            )
            return True
        self._failures.failed(exc)  # one traceback, then a line per 30 s
        self._registry.failed(FINALIZE_LOOP, exc)
        return False

    def is_alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)
