"""The worker: a poller that claims batches, a delivery loop, and the finalizer.

Capacity (``TE_WORKER_MAX_CONCURRENT``) bounds what a worker holds: an execution takes a
slot when it is claimed and gives it back when its attempt is recorded
(:mod:`chalicelib.worker.holds`). The worker claims into free slots and those whose
attempts are being recorded, so every execution it holds RUNNING is being delivered (or is
in the batch being handed out, or its result is on its way to the database), what it
cannot start stays QUEUED (cancellable, and free for an idle worker), and a crash
redelivers at most its capacity. Per endpoint, the
claim takes no more than the endpoint's cap (``spec.max_concurrent``, else every slot but a
reserve while it alone has work, and ``TE_WORKER_ENDPOINT_SHARE`` of the capacity once
another endpoint has work too: :class:`~chalicelib.worker.holds.Holds`), so one hung
endpoint cannot take every slot.
Leases are renewed while held (:class:`~chalicelib.worker.holds.LeaseKeeper`), and a
delivery is not sent once its lease may have expired. Paused, held and flow-controlled
endpoints are left out of that claim; flow-controlled ones get a metered claim of their
own (:mod:`chalicelib.worker.flow`).

The poller claims up to the free room in one statement and sleeps
``TE_WORKER_POLL_INTERVAL_MS`` only when nothing was due; :mod:`chalicelib.worker.idle` says
what ends that sleep early (:meth:`Worker.nudge`, PostgreSQL LISTEN).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping

from chalicelib.db import notify
from chalicelib.db.connection import Database, Transaction
from chalicelib.errors import DatabaseError
from chalicelib.logs import log_event
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.settings import Settings
from chalicelib.worker.claims import ClaimLimits, ClaimPlan, ClaimStrategy
from chalicelib.worker.deliveries import DeliveryLoop, LeaseLost
from chalicelib.worker.dispatchers import Dispatcher
from chalicelib.worker.finalizer import Finalizer
from chalicelib.worker.flow import Controls, MeteredClaim
from chalicelib.worker.holds import Holds, LeaseKeeper
from chalicelib.worker.idle import IdleWait, SleepStats
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.pipeline import Pipeline, Prepared
from chalicelib.worker.reporting import ClaimLoopHealth, log_finalized, new_worker_id

log = logging.getLogger("chalicelib.worker")

#: Claim once at least this share of the capacity is free, or after CLAIM_LINGER_SEC:
#: fewer, larger claims mean fewer commits per delivered execution.
MIN_BATCH_SHARE = 4
CLAIM_LINGER_SEC = 0.002


class Worker:
    """Claims, delivers and finalizes executions; run it with :meth:`run` in any thread."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        claims: ClaimStrategy,
        pipeline: Pipeline,
        dispatchers: Mapping[str, Dispatcher],
        worker_id: str | None = None,
    ) -> None:
        self.db = db
        self.worker_id = worker_id or new_worker_id()
        self.capacity = settings.worker_max_concurrent
        self._poll_interval = settings.worker_poll_interval_ms / 1000
        self._claims = claims
        self._pipeline = pipeline
        self._dispatchers = dispatchers
        self._deliveries = DeliveryLoop(
            pipeline,
            dispatchers,
            capacity=self.capacity,
            on_finished=self._sent,
            on_lost=self._lost,
            may_send=self._owned,
        )
        self.loops = LoopRegistry()  #: its loops' states (claim, finalize), for its heartbeat
        self._finalizer = Finalizer(db, self.worker_id, self._finalized, self, self.loops)
        self._claim_health = ClaimLoopHealth(self.loops, self._poll_interval)
        self._cond = threading.Condition()
        self._counts = {"claimed": 0, "succeeded": 0, "retrying": 0, "failed": 0}
        self.holds = Holds(
            capacity=self.capacity,
            default_cap=max(1, math.ceil(self.capacity * settings.worker_endpoint_share)),
            lease_sec=settings.stuck_execution_timeout_sec,
        )
        self.leases = LeaseKeeper(db, self.worker_id, self.holds, self._cond)
        self._full: frozenset[str] = frozenset()  # endpoints at their share at the last claim
        #: Paused, held and flow-controlled endpoints (re-read once per poll interval), and
        #: the claim that serves the flow-controlled ones (chalicelib.worker.flow).
        self.controls = Controls(db, self._poll_interval)
        self._metered = MeteredClaim()
        #: One claim at a time (the poller's, or a finalize batch's refill), so the room and
        #: the per-endpoint shares a claim is sized by are never claimed twice.
        self._claim_lock = threading.Lock()
        self._stopping: Callable[[], bool] | None = None  # set while run() runs
        #: Claims made inside finalize transactions (diagnostics; tests read it).
        self.refills = 0
        self._idle = IdleWait(db, settings.wakeup_notify)
        self._stop = threading.Event()

    # -- control -----------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        with self._cond:
            return len(self.holds)

    def counts(self) -> dict[str, int]:
        """Executions claimed and finalized (by outcome) since this worker started."""
        with self._cond:
            return dict(self._counts)

    @property
    def sleeps(self) -> SleepStats:
        """How this worker's idle sleeps ended (tests tell a wake-up from a timed-out poll)."""
        return self._idle.stats

    @property
    def listener(self) -> notify.Listener | None:
        """The running LISTEN connection's thread, if any (tests inspect it)."""
        return self._idle.listener

    def nudge(self) -> None:
        """Claim now instead of at the end of the current poll sleep."""
        self._idle.wake()

    def stop(self) -> None:
        """Stop claiming (signal-handler safe); :meth:`run` returns soon after."""
        self._stop.set()
        self._idle.wake()

    def run(
        self,
        stop_event: threading.Event | None = None,
        *,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Claim and deliver until :meth:`stop`, ``stop_event`` or ``until()`` says stop.

        Returns without waiting for in-flight executions: call :meth:`drain` for that.
        """

        def stopping() -> bool:
            external = stop_event is not None and stop_event.is_set()
            return self._stop.is_set() or external or (until is not None and until())

        self._finalizer.start()
        self.leases.start()
        listener = self._idle.listen()
        self._stopping = stopping
        try:
            while not stopping():
                if not self._wait_for_capacity(stopping):
                    break
                try:
                    claimed = self.run_once()
                    self._claim_health.succeeded()
                except Exception as exc:  # the database, a bug: never the end of the worker
                    self._idle.sleep(self._claim_health.failed(exc))
                    continue
                if claimed == 0:
                    self._idle.sleep(self.controls.idle_sleep(self._poll_interval))
        finally:
            self._stopping = None
            if listener is not None:
                listener.stop()

    def run_once(self) -> int:
        """Claim up to the free capacity once and start the deliveries; returns how many."""
        self._finalizer.start()
        self.leases.start()
        self.controls.refresh()
        with self._claim_lock:
            free, limits = self._room()
            if free <= 0:
                return 0
            started = time.monotonic()
            batch = self._claims.claim(self.db, self.worker_id, free, limits)
            self._hold(batch, started)
        self._start(batch)  # before the metered claim: its failure must not strand these
        return len(batch) + self._claim_metered()

    def _claim_metered(self) -> int:
        """The flow-controlled endpoints' claim, when one is due; returns how many it took."""
        names = self.controls.metered_due()
        if not names:
            return 0
        with self._claim_lock:
            free, limits = self._room()
            if free <= 0:
                return 0
            started = time.monotonic()
            batch = self._metered.claim(self.db, self.worker_id, free, limits, names)
            self._hold(batch, started)
        self._start(batch)
        return len(batch)

    # -- refill: claims inside the finalizer's transaction (finalizer.Refill) -----------

    def plan_claim(self, freed: int) -> ClaimPlan | None:
        """Room for a claim inside a finalize transaction, while :meth:`run` runs; holds the
        claim lock until :meth:`claimed`.

        Never waits: if another claim is in flight (the poller's, or the other writer's
        refill), this transaction records only; the next claim counts the slots it frees
        (:meth:`Holds.claimable`, which already counts ``freed``).
        """
        stopping = self._stopping
        if stopping is None or stopping():
            return None
        if not self._claim_lock.acquire(blocking=False):
            return None
        room, limits = self._room()
        if room <= 0:
            self._claim_lock.release()
            return None
        return ClaimPlan(room, limits, time.monotonic())

    def claim_in(self, tx: Transaction, plan: ClaimPlan) -> list[ClaimedExecution]:
        return self._claims.claim_in(tx, self.worker_id, plan.room, plan.limits)

    def claimed(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        try:
            self._hold(batch, plan.started)
            self.refills += bool(batch)
        finally:
            self._claim_lock.release()
        self._start(batch)

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until every claimed execution is finalized."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.holds) > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self, *, abandon: bool = False) -> None:
        """Release threads and clients (after :meth:`drain`; ``abandon`` drops what is left)."""
        self._deliveries.close(abandon=abandon)
        self._finalizer.stop(abandon=abandon)
        self.leases.stop()
        for dispatcher in self._dispatchers.values():
            dispatcher.close()

    # -- internals ---------------------------------------------------------------------

    def _wait_for_capacity(self, stopping: Callable[[], bool]) -> bool:
        """Block until a batch worth claiming is free; False if asked to stop meanwhile."""
        min_batch = max(1, self.capacity // MIN_BATCH_SHARE)
        linger_until = time.monotonic() + CLAIM_LINGER_SEC
        with self._cond:
            while not stopping():
                free = self.holds.claimable()
                if free >= min_batch or (free > 0 and time.monotonic() >= linger_until):
                    return True
                wait = CLAIM_LINGER_SEC if free > 0 else self._poll_interval
                self._cond.wait(wait)
        return False

    def _room(self) -> tuple[int, ClaimLimits]:
        """How many to claim, and the claim's limits (call with the claim lock held)."""
        with self._cond:
            limits = dataclasses.replace(self.holds.limits(), excluded=self.controls.excluded)
            # If endpoints are at their share, a delivery of theirs ending is worth a claim
            # (their backlog may be all that is due): _delivered ends the idle sleep then.
            self._full = frozenset(limits.full)
            return self.holds.claimable(), limits

    def _hold(self, batch: list[ClaimedExecution], started: float) -> None:
        """A claim committed: hold what it took (call with the claim lock held)."""
        if not batch:
            return
        with self._cond:
            self.holds.add(batch, started)
            self._counts["claimed"] += len(batch)
        log_event(
            log,
            "worker_batch_claimed",
            worker_id=self.worker_id,
            count=len(batch),
            claim_ms=round((time.monotonic() - started) * 1000, 2),
        )

    def _start(self, batch: list[ClaimedExecution]) -> None:
        if batch:
            self._deliveries.submit(self._prepare(batch))

    def _prepare(self, batch: list[ClaimedExecution]) -> list[Prepared]:
        """Resolve each request on this thread; an execution that cannot be sent (its
        templates do not resolve, or its row cannot be processed) finishes here and then."""
        ready = []
        for claimed in batch:
            try:
                prepared = self._prepare_one(claimed)
            except DatabaseError as exc:
                # Config/secret reads failed: leave it RUNNING; the reclaimer retries it.
                log.warning(
                    "execution left RUNNING: %s", exc, extra={"execution_id": claimed.execution_id}
                )
                self._release(claimed.execution_id, claimed.attempt)
                continue
            except Exception as exc:  # one bad execution must not stop claims
                prepared = self._pipeline.unprocessable(claimed, exc)
            if isinstance(prepared, FinishedExecution):
                self._delivered(prepared)
            else:
                ready.append(prepared)
        return ready

    def _prepare_one(self, claimed: ClaimedExecution) -> Prepared | FinishedExecution:
        if claimed.fault is not None:
            return self._pipeline.unprocessable(claimed, claimed.fault)
        if claimed.endpoint_type not in self._dispatchers:
            reason = f"no dispatcher for endpoint type {claimed.endpoint_type!r}"
            return self._pipeline.unprocessable(claimed, reason)
        return self._pipeline.prepare(claimed)

    def _owned(self, claimed: ClaimedExecution) -> bool:
        """Checked just before a send: the lease still surely holds."""
        with self._cond:
            return self.holds.owned(claimed.execution_id)

    def _sent(self, finished: FinishedExecution) -> None:
        """A delivery ended; it holds its delivery slot until its attempt is recorded."""
        self._delivered(finished, slot=True)

    def _delivered(self, finished: FinishedExecution, *, slot: bool = False) -> None:
        self._finalizer.submit(finished)
        with self._cond:
            self.holds.delivered(finished.execution_id, finished.attempt_number, slot=slot)
            if finished.endpoint in self._full and self.holds.room(finished.endpoint) >= max(
                1, self.holds.cap(finished.endpoint) // MIN_BATCH_SHARE
            ):
                self._full = frozenset()
                self._idle.wake()
            self._cond.notify_all()

    def _lost(self, claimed: ClaimedExecution, exc: BaseException) -> None:
        extra = {"execution_id": claimed.execution_id}
        if isinstance(exc, LeaseLost):
            log.warning("lease lost before the send; not sent", extra=extra)
        elif isinstance(exc, Exception):
            log.error("delivery failed; execution left RUNNING", exc_info=exc, extra=extra)
        else:  # cancelled by close(abandon=True)
            log.warning("delivery abandoned at shutdown; execution left RUNNING", extra=extra)
        self._release(claimed.execution_id, claimed.attempt)

    def _finalized(self, finished: FinishedExecution, applied: bool) -> None:
        self._release(finished.execution_id, finished.attempt_number)
        counter = log_finalized(finished, applied)
        if counter is not None:
            with self._cond:
                self._counts[counter] += 1

    def _release(self, execution_id: str, attempt: int) -> None:
        """One execution left the worker (recorded, or left RUNNING for the reclaimer)."""
        with self._cond:
            slot = self.holds.release(execution_id, attempt)
            self._cond.notify_all()
        if slot:
            self._deliveries.release_slots(1)
