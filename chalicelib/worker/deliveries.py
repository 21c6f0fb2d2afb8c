"""Deliveries as tasks on one asyncio event loop, in a thread of its own.

Why a loop and not a thread per delivery: with 50 delivery threads each blocking in
``http.client``, the worker spent most of its CPU in the HTTP stack and in handing the GIL
between threads (``bench/results/PROFILE.md``). One loop multiplexing the deliveries over
keep-alive connections does the same work with a fraction of the CPU.

Dispatchers that offer ``dispatch_async`` (HTTP) run on the loop. The others (Kafka and
Redis, whose clients block, and test doubles) run their blocking ``dispatch`` on a thread
pool sized to the worker's capacity, so the loop never blocks on them.

The thread that claimed prepares (:mod:`chalicelib.worker.starter`: template resolution
may read the database on a cache miss, which must not block the loop); this module only
dispatches and completes. In the worker's ring (:mod:`chalicelib.worker.worker`) it is the
stage between the claimer and the finalizer: it takes :class:`Prepared` executions, writes
to the ledger what became of each (delivered, or lost: left RUNNING for the reclaimer), and
hands every :class:`FinishedExecution` to the finalizer's queue.

Once a send has begun, whatever a dispatcher raises (a library error it did not expect, a
value from the target or from a stored spec it could not handle) ends the attempt as a
recorded ``INTERNAL_ERROR`` with the normal retry decision: the request may have gone out,
so leaving the execution RUNNING would have the reclaimer send it again after every lease.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from chalicelib.domain.delivery import DeliveryErrorType, DeliveryOutcome, failed
from chalicelib.worker.dispatchers import Dispatcher
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.pipeline import Pipeline, Prepared

log = logging.getLogger("chalicelib.worker")

#: How long close() waits for the loop to finish its shutdown work.
CLOSE_TIMEOUT_SEC = 10.0


class Recorder(Protocol):
    """Where finished executions go: the finalizer's queue
    (:class:`~chalicelib.worker.finished.FinishedQueue`)."""

    def submit(self, finished: FinishedExecution) -> None: ...


class LeaseLost(Exception):
    """The execution's lease may have expired before its send: it is not sent."""


class DeliveryLoop:
    """Runs dispatch + complete for prepared executions; results go to the recorder."""

    def __init__(
        self,
        pipeline: Pipeline,
        dispatchers: Mapping[str, Dispatcher],
        *,
        ledger: Ledger,
        recorder: Recorder,
    ) -> None:
        self._pipeline = pipeline
        self._dispatchers = dispatchers
        self.endpoint_types = frozenset(dispatchers)  #: those it has a dispatcher for
        self._capacity = ledger.capacity
        self._ledger = ledger
        self._recorder = recorder
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._blocking: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()

    def submit(self, batch: Iterable[Prepared]) -> None:
        """Start delivering ``batch`` (any thread; returns at once)."""
        items = list(batch)
        if items:
            self._running_loop().call_soon_threadsafe(self._spawn, items)

    def close(self, *, abandon: bool = False) -> None:
        """Stop the loop; ``abandon`` cancels deliveries still running (they stay RUNNING)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            done = asyncio.run_coroutine_threadsafe(self._shutdown(abandon), loop)
            try:
                done.result(CLOSE_TIMEOUT_SEC)
            except Exception as exc:  # shutdown must finish whatever failed
                log.warning("delivery loop shutdown incomplete", exc_info=exc)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CLOSE_TIMEOUT_SEC)
            if not thread.is_alive():
                loop.close()
        if self._blocking is not None:
            self._blocking.shutdown(wait=not abandon, cancel_futures=abandon)
            self._blocking = None

    # -- the loop's thread ---------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_run_forever, args=(loop, ready), name="te-delivery-loop", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def _spawn(self, batch: list[Prepared]) -> None:
        loop = asyncio.get_running_loop()
        for prepared in batch:
            task = loop.create_task(self._deliver(prepared))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, prepared: Prepared) -> None:
        """Send once a send slot is free. A sent execution keeps its slot until its attempt
        is recorded (the ledger gives it back then): sent-but-unrecorded executions, what a
        crash would deliver twice, never exceed the capacity."""
        slots = self._ledger.send_slots
        holding = False
        try:
            await slots.acquire()  # FIFO: executions go out in claim order
            holding = True
            if not self._ledger.owned(prepared.claimed.execution_id):
                raise LeaseLost(prepared.claimed.execution_id)
            if prepared.claimed.expired():  # waited for a slot past its expire_after
                slots.give_back()
                holding = False
                self.finish_unsent(self._pipeline.expired(prepared.claimed))
                return
            # The attempt's times measure the delivery itself, from here.
            prepared = self._pipeline.begin(prepared)
            outcome = await self._dispatch_guarded(prepared)
            finished = self._complete(prepared, outcome)
        except asyncio.CancelledError as exc:
            if holding:
                slots.give_back()
            self._lost(prepared.claimed, exc)
            raise
        except Exception as exc:  # the lease lost before the send, or a bug of ours
            if holding:
                slots.give_back()
            self._lost(prepared.claimed, exc)
            return
        self._ledger.delivered(finished, sent=True)
        self._recorder.submit(finished)

    def finish_unsent(self, finished: FinishedExecution) -> None:
        """An execution that ends without a send (it holds no send slot) to the recorder
        (any thread)."""
        self._ledger.delivered(finished, sent=False)
        self._recorder.submit(finished)

    def _lost(self, claimed: ClaimedExecution, exc: BaseException) -> None:
        """A delivery that ended without a finished execution (the lease lost, a bug, or
        cancelled at shutdown): it stays RUNNING and the reclaimer retries it."""
        extra = {"execution_id": claimed.execution_id}
        if isinstance(exc, LeaseLost):
            log.warning("lease lost before the send; not sent", extra=extra)
        elif isinstance(exc, Exception):
            log.error("delivery failed; execution left RUNNING", exc_info=exc, extra=extra)
        else:  # cancelled by close(abandon=True)
            log.warning("delivery abandoned at shutdown; execution left RUNNING", extra=extra)
        self._ledger.release(claimed.execution_id, claimed.attempt)

    def _complete(self, prepared: Prepared, outcome: DeliveryOutcome) -> FinishedExecution:
        """The finished execution; FAILED ``UNPROCESSABLE`` if the outcome cannot be
        handled (it was sent: leaving it RUNNING would have the reclaimer send it again)."""
        try:
            return self._pipeline.complete(prepared, outcome)
        except Exception as exc:
            log.error(
                "outcome of a delivery cannot be handled; execution FAILED",
                exc_info=exc,
                extra={"execution_id": prepared.claimed.execution_id},
            )
            return self._pipeline.unprocessable(prepared.claimed, exc, sent=True)

    async def _dispatch_guarded(self, prepared: Prepared) -> DeliveryOutcome:
        """The dispatch's outcome; an exception out of it is a failed attempt of type
        ``INTERNAL_ERROR`` (retried as the policy allows), never a delivery left RUNNING.
        (One coroutine: the dispatcher's own is awaited here, not through another.)"""
        try:
            dispatcher: Any = self._dispatchers[prepared.claimed.endpoint_type]
            send_async = getattr(dispatcher, "dispatch_async", None)
            if send_async is not None:
                outcome: DeliveryOutcome = await send_async(prepared.request)
                return outcome
            return await asyncio.get_running_loop().run_in_executor(
                self._blocking_pool(), dispatcher.dispatch, prepared.request
            )
        except Exception as exc:  # cancellation (BaseException) still leaves it RUNNING
            log.error(
                "delivery raised; attempt recorded as %s",
                DeliveryErrorType.INTERNAL_ERROR,
                exc_info=exc,
                extra={"execution_id": prepared.claimed.execution_id},
            )
            # The pipeline redacts secret values from the message before it is recorded.
            return failed(
                DeliveryErrorType.INTERNAL_ERROR,
                f"the delivery failed unexpectedly: {type(exc).__name__}: {exc}",
            )

    def _blocking_pool(self) -> ThreadPoolExecutor:
        if self._blocking is None:
            self._blocking = ThreadPoolExecutor(self._capacity, thread_name_prefix="te-delivery")
        return self._blocking

    async def _shutdown(self, abandon: bool) -> None:
        if abandon:
            for task in list(self._tasks):
                task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for dispatcher in self._dispatchers.values():
            aclose = getattr(dispatcher, "aclose", None)
            if aclose is not None:
                await aclose()


def _run_forever(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()
