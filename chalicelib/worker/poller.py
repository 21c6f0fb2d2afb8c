"""The worker: a poller that claims batches, a delivery loop, and the finalizer.

Capacity (``TE_WORKER_MAX_CONCURRENT``) bounds concurrent deliveries (the delivery loop's
semaphore). Two more bounds keep the slots busy without hoarding work:

* claimed but not yet delivered: what the worker delivers in :data:`AHEAD_SEC` at its
  recent rate, and at least twice the capacity, so the slots stay busy while the next claim
  is in its round trip (at 3,000 deliveries/s that takes a few hundred executions) but a
  slow target cannot make one worker sit on executions that other workers could run;
* claimed but not yet finalized: at most :data:`WINDOW_FACTOR` times the capacity, so fast
  deliveries never wait for a finalize batch's commit. With both bounds at one capacity
  (before), throughput was capped at capacity / commit round trip: 1,400/s in ``bench/``.
  The window also bounds what a crash hands to the reclaimer.

The poller claims up to the free room in one statement and sleeps
``TE_WORKER_POLL_INTERVAL_MS`` only when nothing was due. Two
accelerators end that sleep early: :meth:`Worker.nudge` (in-process, the local stack) and a
PostgreSQL LISTEN connection (:class:`chalicelib.db.notify.Listener`, on unless
``TE_WAKEUP_NOTIFY`` or CockroachDB says otherwise). Polling stays the correct fallback.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chalicelib.db import notify
from chalicelib.db.connection import Database
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.errors import DatabaseError
from chalicelib.logs import FailureLog, log_event
from chalicelib.settings import Settings
from chalicelib.worker.claims import ClaimStrategy
from chalicelib.worker.deliveries import DeliveryLoop
from chalicelib.worker.dispatchers import Dispatcher
from chalicelib.worker.finalizer import Finalizer
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.pipeline import Pipeline, Prepared

log = logging.getLogger("chalicelib.worker")

#: Executions held (claimed, not yet finalized) per delivery slot; see the module docstring.
WINDOW_FACTOR = 16
#: Executions claimed but not yet delivered: at least this many per delivery slot ...
AHEAD_FACTOR = 2
#: ... or as many as the worker delivered in this many seconds, at its recent rate.
AHEAD_SEC = 0.15
#: Claim once at least this share of the capacity is free, or after CLAIM_LINGER_SEC:
#: fewer, larger claims mean fewer commits per delivered execution.
MIN_BATCH_SHARE = 4
CLAIM_LINGER_SEC = 0.002

_EVENTS = {
    ExecutionStatus.SUCCESS: ("execution_succeeded", logging.INFO),
    ExecutionStatus.RETRYING: ("execution_retrying", logging.WARNING),
    ExecutionStatus.FAILED: ("execution_failed", logging.ERROR),
}
_COUNTERS = {
    ExecutionStatus.SUCCESS: "succeeded",
    ExecutionStatus.RETRYING: "retrying",
    ExecutionStatus.FAILED: "failed",
}


@dataclass
class SleepStats:
    """How idle sleeps ended (diagnostics; tests tell a wake-up from a timed-out poll)."""

    started: int = 0
    woken: int = 0  #: ended early by a nudge or a notification
    timed_out: int = 0  #: ran the whole poll interval


class RateMeter:
    """Events per second over the last completed period (callers hold the worker's lock)."""

    PERIOD_SEC = 0.5

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since = clock()
        self._events = 0
        self._rate = 0.0

    def count(self) -> None:
        self._events += 1

    def per_sec(self) -> float:
        now = self._clock()
        elapsed = now - self._since
        if elapsed >= self.PERIOD_SEC:
            self._rate = self._events / elapsed
            self._since, self._events = now, 0
        return self._rate


def new_worker_id() -> str:
    """Unique per process and instance: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


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
        self._wakeup_notify = settings.wakeup_notify
        self._claims = claims
        self._pipeline = pipeline
        self._dispatchers = dispatchers
        self._deliveries = DeliveryLoop(
            pipeline,
            dispatchers,
            capacity=self.capacity,
            on_finished=self._delivered,
            on_lost=self._lost,
        )
        self._finalizer = Finalizer(db, self.worker_id, self._finalized)
        self._claim_failures = FailureLog(log, "claim (retrying every poll interval)")
        self._cond = threading.Condition()
        self._counts = {"claimed": 0, "succeeded": 0, "retrying": 0, "failed": 0}
        self._in_flight = 0  # claimed, not yet finalized
        self._undelivered = 0  # claimed, delivery not finished
        self._rate = RateMeter()  # deliveries per second, recently
        self._wake = threading.Event()
        self.sleeps = SleepStats()
        #: The running LISTEN connection's thread, if any (tests inspect it).
        self.listener: notify.Listener | None = None
        self._stop = threading.Event()

    # -- control -----------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def counts(self) -> dict[str, int]:
        """Executions claimed and finalized (by outcome) since this worker started."""
        with self._cond:
            return dict(self._counts)

    def nudge(self) -> None:
        """Claim now instead of at the end of the current poll sleep."""
        self._wake.set()

    def stop(self) -> None:
        """Stop claiming (signal-handler safe); :meth:`run` returns soon after."""
        self._stop.set()
        self._wake.set()

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
        listener = self._start_listener()
        try:
            while not stopping():
                if not self._wait_for_capacity(stopping):
                    break
                try:
                    claimed = self.run_once()
                    self._claim_failures.succeeded()
                except DatabaseError as exc:
                    self._claim_failures.failed(exc)  # one traceback, then a line per 30 s
                    claimed = 0
                if claimed == 0:
                    self._sleep()
        finally:
            if listener is not None:
                listener.stop()

    def run_once(self) -> int:
        """Claim up to the free capacity once and start the deliveries; returns how many."""
        self._finalizer.start()
        with self._cond:
            free = self._free()
        if free <= 0:
            return 0
        started = time.monotonic()
        batch = self._claims.claim(self.db, self.worker_id, free)
        if not batch:
            return 0
        with self._cond:
            self._in_flight += len(batch)
            self._undelivered += len(batch)
            self._counts["claimed"] += len(batch)
        log_event(
            log,
            "worker_batch_claimed",
            worker_id=self.worker_id,
            count=len(batch),
            claim_ms=round((time.monotonic() - started) * 1000, 2),
        )
        self._deliveries.submit(self._prepare(batch))
        return len(batch)

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until every claimed execution is finalized."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._in_flight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self, *, abandon: bool = False) -> None:
        """Release threads and clients (after :meth:`drain`; ``abandon`` drops what is left)."""
        self._deliveries.close(abandon=abandon)
        self._finalizer.stop(abandon=abandon)
        for dispatcher in self._dispatchers.values():
            dispatcher.close()

    # -- internals ---------------------------------------------------------------------

    def _wait_for_capacity(self, stopping: Callable[[], bool]) -> bool:
        """Block until a batch worth claiming is free; False if asked to stop meanwhile."""
        min_batch = max(1, self.capacity // MIN_BATCH_SHARE)
        linger_until = time.monotonic() + CLAIM_LINGER_SEC
        with self._cond:
            while not stopping():
                free = self._free()
                if free >= min_batch or (free > 0 and time.monotonic() >= linger_until):
                    return True
                wait = CLAIM_LINGER_SEC if free > 0 else self._poll_interval
                self._cond.wait(wait)
        return False

    def _sleep(self) -> None:
        """Idle: wait the poll interval unless a nudge or a notification comes first."""
        self.sleeps.started += 1
        if self._wake.wait(self._poll_interval):
            self.sleeps.woken += 1
        else:
            self.sleeps.timed_out += 1
        self._wake.clear()

    def _start_listener(self) -> notify.Listener | None:
        """LISTEN for queued executions (PostgreSQL) so an idle sleep ends at once.

        An accelerator: if the database cannot tell its flavor now, the worker polls only.
        """
        try:
            if not notify.enabled(self.db, self._wakeup_notify):
                return None
        except DatabaseError as exc:
            log.warning("cannot decide on LISTEN/NOTIFY; polling only", exc_info=exc)
            return None
        listener = notify.Listener(self.db.params, self.nudge)
        listener.start()
        self.listener = listener
        return listener

    def _free(self) -> int:
        """Slots to claim into (call with the condition held)."""
        window = WINDOW_FACTOR * self.capacity
        ahead = max(AHEAD_FACTOR * self.capacity, int(self._rate.per_sec() * AHEAD_SEC))
        return min(min(ahead, window) - self._undelivered, window - self._in_flight)

    def _prepare(self, batch: list[ClaimedExecution]) -> list[Prepared]:
        """Resolve each request on this thread; template failures finish here and then."""
        ready = []
        for claimed in batch:
            try:
                prepared = self._pipeline.prepare(claimed)
            except DatabaseError as exc:
                # Config/secret reads failed: leave it RUNNING; the reclaimer retries it.
                log.warning(
                    "execution left RUNNING: %s", exc, extra={"execution_id": claimed.execution_id}
                )
                self._release(delivered=True)
                continue
            except Exception as exc:  # one bad execution must not stop claims
                self._lost(claimed, exc)
                continue
            if isinstance(prepared, FinishedExecution):
                self._delivered(prepared)
            else:
                ready.append(prepared)
        return ready

    def _delivered(self, finished: FinishedExecution) -> None:
        self._finalizer.submit(finished)
        with self._cond:
            self._undelivered -= 1
            self._rate.count()
            self._cond.notify_all()

    def _lost(self, claimed: ClaimedExecution, exc: BaseException) -> None:
        extra = {"execution_id": claimed.execution_id}
        if isinstance(exc, Exception):
            log.error("delivery failed; execution left RUNNING", exc_info=exc, extra=extra)
        else:  # cancelled by close(abandon=True)
            log.warning("delivery abandoned at shutdown; execution left RUNNING", extra=extra)
        self._release(delivered=True)

    def _finalized(self, finished: FinishedExecution, applied: bool) -> None:
        self._release()
        if not applied:
            log_event(
                log,
                "execution_finalize_skipped",
                level=logging.WARNING,
                execution_id=finished.execution_id,
                attempt=finished.attempt_number,
            )
            return
        event, level = _EVENTS[finished.next_status]
        with self._cond:
            self._counts[_COUNTERS[finished.next_status]] += 1
        log_event(
            log,
            event,
            level=level,
            execution_id=finished.execution_id,
            endpoint=finished.endpoint,
            attempt=finished.attempt_number,
            duration_ms=finished.duration_ms,
            error_type=None if finished.error is None else finished.error.get("type"),
            retry_delay_ms=finished.retry_delay_ms,
            count=1,  # CloudWatch metric filters sum $.count (infra/stacks/observability.py)
        )

    def _release(self, *, delivered: bool = False) -> None:
        """One execution left the window (finalized, or left RUNNING for the reclaimer);
        ``delivered``: it never reached :meth:`_delivered` (so it is done delivering too)."""
        with self._cond:
            self._in_flight -= 1
            self._undelivered -= int(delivered)
            self._cond.notify_all()
