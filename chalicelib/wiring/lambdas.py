"""The scheduled Lambda functions (EventBridge ``rate(1 minute)``): the worker and the
scheduler's loops, each for most of one invocation.

A deployed function imports this module alone (its handler is ``chalicelib.wiring.lambdas.
<function>``), so the container's root lives here: :data:`root`, built empty at import
(nothing is read or connected until the first invocation) and kept for warm invocations,
with the container's worker. Invocations may overlap (the Lambda timeout is longer than the
minute): every loop is idempotent, and the worker's claims are leased.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalice import Blueprint
from chalice.app import CloudWatchEvent

from chalicelib.scheduler.lambdas import SCHEDULE
from chalicelib.scheduler.names import (
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)
from chalicelib.wiring.process import ProcessRoot

if TYPE_CHECKING:
    from chalicelib.wiring.worker import LambdaWorker

bp = Blueprint(__name__)


class LambdaRoot:
    """One Lambda container's process root and its worker (built on first use)."""

    def __init__(self, process: ProcessRoot | None = None) -> None:
        self.process = process or ProcessRoot()
        self._worker: LambdaWorker | None = None

    def run_worker(self, context: Any) -> dict[str, Any]:
        if self._worker is None:
            # Here, not at import: the API function imports this module too, and its cold
            # start must not load the worker (urllib3, kafka-python, redis).
            from chalicelib.wiring.worker import LambdaWorker

            self._worker = LambdaWorker(self.process)
        return self._worker.invoke(context)

    def run_loop(self, loop: str, context: Any, beside: tuple[str, ...] = ()) -> dict[str, Any]:
        from chalicelib.wiring import scheduler  # on first use, as the worker above

        return scheduler.invoke(self.process, loop, context, beside=beside)

    def close(self) -> None:
        """Stop the worker and close the pools (tests: the next root is a new container)."""
        if self._worker is not None:
            self._worker.close()
        self.process.close()


#: This container's root (tests replace it to start from a new container).
root = LambdaRoot()


@bp.schedule(SCHEDULE, name="run_worker")
def run_worker(event: CloudWatchEvent) -> dict[str, Any]:
    """One long-poll session of the container's worker, then drain."""
    return root.run_worker(event.context)


@bp.schedule(SCHEDULE, name="materialize_cron_ticks")
def materialize_cron_ticks(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 1 for about a minute: materialize due cron ticks every TE_CRON_TICK_INTERVAL_SEC."""
    return root.run_loop(CRON_MATERIALIZER, event.context)


@bp.schedule(SCHEDULE, name="promote_delayed_executions")
def promote_delayed_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 2 for about a minute: PENDING -> QUEUED every TE_PROMOTE_INTERVAL_MS."""
    return root.run_loop(DELAYED_PROMOTER, event.context)


@bp.schedule(SCHEDULE, name="reclaim_stuck_executions")
def reclaim_stuck_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 3 for about a minute: recover expired leases every TE_RECLAIM_INTERVAL_SEC.

    The housekeeper (loop 4: retention purge, heartbeat pruning) runs beside it: both are
    slow, periodic and idempotent, and sharing the function keeps the deployment at three
    scheduled functions.
    """
    return root.run_loop(STUCK_RECLAIMER, event.context, beside=(HOUSEKEEPER,))
