"""The claimer: the stage of the worker's ring that takes due executions and starts them.

It waits in the ledger for room (free slots, and those whose attempts are being recorded:
:meth:`Claims.claimable`), claims up to that room in one statement, holds what it took in
the ledger, resolves each request on its own thread (templates, configs and secrets may
read the database on a cache miss, which must not block the delivery loop) and hands the
prepared executions to the delivery loop. One that cannot be sent (its templates do not
resolve, its row cannot be processed) goes straight to the finalizer.

It also claims where the finalizer records (:meth:`plan_claim`, then :meth:`record_and_claim`
or :meth:`claim_in`, then :meth:`claimed`): one commit records a batch and refills the slots
it frees. With a strategy that records and claims in one statement (PostgreSQL's), the
claimer's own loop leaves the slots of attempts being recorded to that refill and claims
only slots that are free (at start, after an idle spell, or what a refill did not fill).
Claims may run side by side (the claimer's own and each writer's refill: a writer whose
batch ends while another one's statement runs refills its slots too, rather than leaving
them to a claim of their own). Each reserves its room before it is sent and gives the
reservation back when it is held (:meth:`_reserve`, :meth:`_settle`); a claim sized
meanwhile leaves that room out, in total and from every endpoint's share
(``ClaimLimits.pending``), so the slots and the shares are never claimed twice. Paused,
held and flow-controlled endpoints are left out of the claim; flow-controlled ones get a
metered claim of their own (:mod:`chalicelib.worker.flow`). It sleeps
``TE_WORKER_POLL_INTERVAL_MS`` only when nothing was due; :mod:`chalicelib.worker.idle`
says what ends that sleep early.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping

from chalicelib.db.connection import Database, Transaction
from chalicelib.errors import DatabaseError
from chalicelib.logs import log_event
from chalicelib.tracing import Tracing
from chalicelib.worker.claims import ClaimPlan, ClaimStrategy
from chalicelib.worker.deliveries import DeliveryLoop, Recorder
from chalicelib.worker.flow import Controls, MeteredClaim
from chalicelib.worker.idle import IdleWait
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.pipeline import Pipeline, Prepared
from chalicelib.worker.reporting import ClaimLoopHealth

log = logging.getLogger("chalicelib.worker")


class Claimer:
    """Claims into the ledger's room and starts the deliveries (see the module)."""

    def __init__(
        self,
        db: Database,
        worker_id: str,
        *,
        claims: ClaimStrategy,
        pipeline: Pipeline,
        endpoint_types: Collection[str],
        ledger: Ledger,
        deliveries: DeliveryLoop,
        recorder: Recorder,
        controls: Controls,
        idle: IdleWait,
        health: ClaimLoopHealth,
        poll_interval: float,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: a ``claim`` span for each claimed execution of a traced job (None:
        off)."""
        self._db = db
        self._tracing = tracing
        self._worker_id = worker_id
        self.claims = claims  #: the claim strategy (TE_CLAIM_STRATEGY)
        self._pipeline = pipeline
        self._endpoint_types = endpoint_types
        self._ledger = ledger
        self._deliveries = deliveries
        self._recorder = recorder
        self.controls = controls
        self._idle = idle
        self._health = health
        self._poll_interval = poll_interval
        self._metered = MeteredClaim()
        #: Guards :attr:`_pending` and the hold of what a claim took: room and reservations
        #: are read and changed together.
        self._room_lock = threading.Lock()
        #: Room reserved by claims in flight (:meth:`_reserve`).
        self._pending = 0
        #: Set while :meth:`run` runs: refills inside finalize transactions only then.
        self._stopping: Callable[[], bool] | None = None
        #: Claims made inside finalize transactions (diagnostics; tests read it).
        self.refills = 0

    def run(self, stopping: Callable[[], bool]) -> None:
        """Claim until ``stopping()``; a failed claim (the database, a bug) backs off."""
        self._stopping = stopping
        try:
            while not stopping():
                if not self._ledger.wait_for_room(
                    stopping, self._poll_interval, recording=self._takes_recording()
                ):
                    break
                try:
                    claimed = self.run_once()
                    self._health.succeeded()
                except Exception as exc:  # never the end of the worker
                    self._idle.sleep(self._health.failed(exc))
                    continue
                if claimed == 0:
                    self._idle.sleep(self.controls.idle_sleep(self._poll_interval))
        finally:
            self._stopping = None

    def run_once(self) -> int:
        """Claim up to the room once and start the deliveries; returns how many."""
        self.controls.refresh()
        db, worker = self._db, self._worker_id
        taken = self._claim_own(lambda plan: self.claims.claim(db, worker, plan.room, plan.limits))
        if taken is None:
            return 0  # no room: a metered claim that is due stays due
        # Started already: a failure of the metered claim must not strand these.
        names = self.controls.metered_due()  # flow-controlled endpoints, when one is due
        if names:
            taken += (
                self._claim_own(
                    lambda plan: self._metered.claim(db, worker, plan.room, plan.limits, names)
                )
                or 0
            )
        return taken

    def _claim_own(self, claim: Callable[[ClaimPlan], list[ClaimedExecution]]) -> int | None:
        """One claim in a transaction of its own, in the room reserved for it: what it
        took is held and started; returns how many, or None if there was no room."""
        plan = self._reserve(recording=self._takes_recording())
        if plan is None:
            return None
        batch: list[ClaimedExecution] = []
        try:
            batch = claim(plan)
        finally:
            self._settle(plan, batch)
        self._start(batch)
        return len(batch)

    # -- the refill, where the finalizer records ------------------------------------------

    def plan_claim(self) -> ClaimPlan | None:
        """Room for a claim where the finalizer records (its statement or transaction),
        while :meth:`run` runs: the room left by the claims in flight, reserved until
        :meth:`claimed`. Never waits."""
        stopping = self._stopping
        if stopping is None or stopping():
            return None
        return self._reserve(recording=True)

    def claim_in(self, tx: Transaction, plan: ClaimPlan) -> list[ClaimedExecution]:
        return self.claims.claim_in(tx, self._worker_id, plan.room, plan.limits)

    @property
    def records_with_claim(self) -> bool:
        """Whether a finalize batch nothing follows is recorded by the claim's statement."""
        return self.claims.records_with_claim

    def record_and_claim(
        self, tx: Transaction, plan: ClaimPlan, record: Mapping[str, str]
    ) -> tuple[set[str], list[ClaimedExecution]]:
        return self.claims.record_and_claim(tx, self._worker_id, plan.room, plan.limits, record)

    def claimed(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        """The finalize transaction committed (``batch`` empty if it failed)."""
        self._settle(plan, batch)
        self.refills += bool(batch)
        self._start(batch)

    # -- internals -----------------------------------------------------------------------

    def _takes_recording(self) -> bool:
        """Whether this loop's claims take the slots of attempts being recorded: not where
        the finalizer's record refills them (PostgreSQL), unless flow-controlled endpoints
        exist, whose metered claim only this loop makes (left only free slots, it could
        wait behind refills that keep every slot busy)."""
        return not self.claims.records_with_claim or bool(self.controls.metered)

    def _reserve(self, *, recording: bool) -> ClaimPlan | None:
        """The room for a claim about to be sent (``recording``: counting the slots of
        attempts being recorded), less what the claims in flight reserved, and reserved in
        turn; None if there is none. Its limits take the reserved room from every
        endpoint's share: a claim in flight may take its whole room from any of them."""
        with self._room_lock:
            room, limits = self._ledger.room(
                self.controls.excluded, recording=recording, pending=self._pending
            )
            if room <= 0:
                return None
            self._pending += room
        return ClaimPlan(room, limits, time.monotonic())

    def _settle(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        """A reserved claim ended (``batch``: what its commit took, empty if it failed):
        what it took is held and its reservation given back in one step, so the room is
        never counted twice nor missed in between."""
        with self._room_lock:
            self._pending -= plan.room
            self._hold(batch, plan.started)

    def _hold(self, batch: list[ClaimedExecution], started: float) -> None:
        """A claim committed: hold what it took."""
        if not batch:
            return
        self._ledger.take(batch, started)
        if self._tracing is not None:
            self._trace_claim(batch, started)
        log_event(
            log,
            "worker_batch_claimed",
            worker_id=self._worker_id,
            count=len(batch),
            claim_ms=round((time.monotonic() - started) * 1000, 2),
        )

    def _trace_claim(self, batch: list[ClaimedExecution], started: float) -> None:
        """The claim's span in each traced job's trace, timed as the claim ran."""
        assert self._tracing is not None
        traced = [
            (c.traceparent, c.tracestate, c.execution_id)
            for c in batch
            if c.traceparent is not None
        ]
        if traced:
            end_ns = time.time_ns()
            start_ns = end_ns - int((time.monotonic() - started) * 1e9)
            self._tracing.claimed(traced, start_ns, end_ns, self._worker_id)

    def _start(self, batch: list[ClaimedExecution]) -> None:
        if batch:
            self._deliveries.submit(self._prepare(batch))

    def _prepare(self, batch: list[ClaimedExecution]) -> list[Prepared]:
        """Resolve each request on this thread; an execution that cannot be sent finishes
        here and goes to the finalizer."""
        ready = []
        for claimed in batch:
            try:
                prepared = self._prepare_one(claimed)
            except DatabaseError as exc:
                # Config/secret reads failed: leave it RUNNING; the reclaimer retries it.
                log.warning(
                    "execution left RUNNING: %s", exc, extra={"execution_id": claimed.execution_id}
                )
                self._ledger.release(claimed.execution_id, claimed.attempt)
                continue
            except Exception as exc:  # one bad execution must not stop claims
                prepared = self._pipeline.unprocessable(claimed, exc)
            if isinstance(prepared, FinishedExecution):
                self._ledger.delivered(prepared, sent=False)
                self._recorder.submit(prepared)
            else:
                ready.append(prepared)
        return ready

    def _prepare_one(self, claimed: ClaimedExecution) -> Prepared | FinishedExecution:
        if claimed.fault is not None:
            return self._pipeline.unprocessable(claimed, claimed.fault)
        if claimed.expired():  # claimed too late: never sent
            return self._pipeline.expired(claimed)
        if claimed.endpoint_type not in self._endpoint_types:
            reason = f"no dispatcher for endpoint type {claimed.endpoint_type!r}"
            return self._pipeline.unprocessable(claimed, reason)
        return self._pipeline.prepare(claimed)
