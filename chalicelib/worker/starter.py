"""The start of what a claim took: held, each request resolved, handed to the delivery loop.

Every claim ends here, the claimer's own and the finalizer's refills alike
(:meth:`Starter.start`, the one call by which the finalizer hands back what it took): its
reservation is given back and what it took held (:meth:`chalicelib.worker.room.Room.settle`),
then each request is resolved on the calling thread (templates, configs and secrets may
read the database on a cache miss, which must not block the delivery loop) and the
prepared executions go to the delivery loop. One that cannot be sent (its templates do not
resolve, its row cannot be processed) finishes unsent, and goes to the finalizer through
the delivery loop (:meth:`~chalicelib.worker.deliveries.DeliveryLoop.finish_unsent`).
"""

from __future__ import annotations

import logging
import time

from chalicelib.errors import DatabaseError
from chalicelib.logs import log_event
from chalicelib.tracing import Tracing
from chalicelib.worker.deliveries import DeliveryLoop
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.models import ClaimedExecution, FinishedExecution
from chalicelib.worker.pipeline import Pipeline, Prepared
from chalicelib.worker.room import ClaimPlan, Room

log = logging.getLogger("chalicelib.worker")


class Starter:
    """Holds and starts what claims took (see the module)."""

    def __init__(
        self,
        room: Room,
        ledger: Ledger,
        pipeline: Pipeline,
        deliveries: DeliveryLoop,
        *,
        worker_id: str,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: a ``claim`` span for each claimed execution of a traced job (None:
        off)."""
        self._room = room
        self._ledger = ledger
        self._pipeline = pipeline
        self._deliveries = deliveries
        self._worker_id = worker_id
        self._tracing = tracing

    def start(self, plan: ClaimPlan, batch: list[ClaimedExecution]) -> None:
        """A reserved claim ended (``batch``: what its commit took, empty if it failed):
        its room is given back, what it took held, and its deliveries started."""
        self._room.settle(plan, batch)
        if batch:
            self._announce(batch, plan.started)
            self._deliveries.submit(self._prepare(batch))

    def _announce(self, batch: list[ClaimedExecution], started: float) -> None:
        """The claim's log event, and its span in each traced job's trace."""
        elapsed = self._ledger.clock() - started
        if self._tracing is not None:
            self._trace_claim(batch, elapsed)
        log_event(
            log,
            "worker_batch_claimed",
            worker_id=self._worker_id,
            count=len(batch),
            claim_ms=round(elapsed * 1000, 2),
        )

    def _trace_claim(self, batch: list[ClaimedExecution], elapsed: float) -> None:
        """The claim's span in each traced job's trace, timed as the claim ran."""
        assert self._tracing is not None
        traced = [
            (c.traceparent, c.tracestate, c.execution_id)
            for c in batch
            if c.traceparent is not None
        ]
        if traced:
            end_ns = time.time_ns()
            start_ns = end_ns - int(elapsed * 1e9)
            self._tracing.claimed(traced, start_ns, end_ns, self._worker_id)

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
                self._deliveries.finish_unsent(prepared)
            else:
                ready.append(prepared)
        return ready

    def _prepare_one(self, claimed: ClaimedExecution) -> Prepared | FinishedExecution:
        if claimed.fault is not None:
            return self._pipeline.unprocessable(claimed, claimed.fault)
        if claimed.expired():  # claimed too late: never sent
            return self._pipeline.expired(claimed)
        if claimed.endpoint_type not in self._deliveries.endpoint_types:
            reason = f"no dispatcher for endpoint type {claimed.endpoint_type!r}"
            return self._pipeline.unprocessable(claimed, reason)
        return self._pipeline.prepare(claimed)
