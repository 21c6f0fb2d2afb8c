"""The scheduled Lambda functions (EventBridge ``rate(1 minute)``): the worker and the
scheduler's loops, each for most of one invocation.

A deployed function imports this module alone (its handler is ``chalicelib.wiring.lambdas.
<function>``), so the container's root lives here: :data:`root`, built empty at import
(nothing is read or connected until the first invocation) and kept for warm invocations,
with the container's worker. Invocations may overlap (the Lambda timeout is longer than the
minute): every loop is idempotent, and the worker's claims are leased.

Every function's body is :meth:`LambdaRoot.invoke` with the function's name, which the local
EventBridge (:mod:`chalicelib.wiring.eventbridge`, ``make run PROFILE=lean``) calls too, on
containers of its own: locally the deployed path runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalice import Blueprint
from chalice.app import CloudWatchEvent

from chalicelib.profiles import (
    MATERIALIZE_CRON_TICKS,
    PROMOTE_DELAYED_EXECUTIONS,
    RECLAIM_STUCK_EXECUTIONS,
    RUN_WORKER,
)
from chalicelib.scheduler.lambdas import SCHEDULE, SCHEDULE_PERIOD_SEC
from chalicelib.scheduler.names import (
    BULK_OPERATOR,
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)
from chalicelib.settings import split_keys
from chalicelib.wiring.process import ProcessRoot

if TYPE_CHECKING:
    from chalicelib.runtime.loop import LoopSpec
    from chalicelib.wiring.worker import LambdaWorker

bp = Blueprint(__name__)

#: Each scheduler function's loop, and the loops it runs beside it.
SCHEDULER_LOOPS: dict[str, tuple[str, tuple[str, ...]]] = {
    MATERIALIZE_CRON_TICKS: (CRON_MATERIALIZER, ()),
    PROMOTE_DELAYED_EXECUTIONS: (DELAYED_PROMOTER, ()),
    # The housekeeper (loop 4: retention purge, heartbeat pruning) and the bulk operator
    # (loop 5: bulk actions, a page per pass) run beside the reclaimer: all are periodic
    # and idempotent, and sharing the function keeps the deployment at three scheduler
    # functions.
    RECLAIM_STUCK_EXECUTIONS: (STUCK_RECLAIMER, (HOUSEKEEPER, BULK_OPERATOR)),
}


class LambdaRoot:
    """One Lambda container's process root and its worker (built on first use)."""

    def __init__(self, process: ProcessRoot | None = None) -> None:
        self.process = process or ProcessRoot()
        self._worker: LambdaWorker | None = None

    def invoke(self, function: str, context: Any) -> dict[str, Any]:
        """One invocation of the scheduled function ``function`` in this container."""
        if function == RUN_WORKER:
            return self.run_worker(context)
        loop, beside = SCHEDULER_LOOPS[function]
        return self.run_loop(loop, context, beside)

    def run_worker(self, context: Any) -> dict[str, Any]:
        if self._worker is None:
            # Here, not at import: the API function imports this module too, and its cold
            # start must not load the worker (urllib3, kafka-python, redis).
            from chalicelib.wiring.worker import LambdaWorker

            self._worker = LambdaWorker(
                self.process, next_invocation_in=SCHEDULE_PERIOD_SEC, hosted=hosted_loops
            )
        return self._worker.invoke(context)

    def run_loop(self, loop: str, context: Any, beside: tuple[str, ...] = ()) -> dict[str, Any]:
        from chalicelib.wiring import scheduler  # on first use, as the worker above

        return scheduler.invoke(self.process, loop, context, beside=beside)

    def close(self) -> None:
        """Stop the worker and close the pools (tests: the next root is a new container)."""
        if self._worker is not None:
            self._worker.close()
        self.process.close()


def hosted_loops(process: ProcessRoot) -> list[LoopSpec]:
    """The scheduler loops TE_WORKER_SCHEDULER_LOOPS names, for the worker to run beside
    its claim at their settings' intervals, on the process's ``scheduler`` pool."""
    # Here, not at import: as the worker's, the loops' modules load on first use.
    from chalicelib.health.region import RegionRefresher
    from chalicelib.wiring.scheduler import build_loop

    settings = process.settings
    names = split_keys(settings.worker_scheduler_loops)
    if not names:
        return []
    db = process.database("scheduler")
    regions = RegionRefresher(db).region_filter
    return [build_loop(name, settings, db, process.clock, regions) for name in names]


#: This container's root (tests replace it to start from a new container).
root = LambdaRoot()


@bp.schedule(SCHEDULE, name=RUN_WORKER)
def run_worker(event: CloudWatchEvent) -> dict[str, Any]:
    """One long-poll session of the container's worker (with the scheduler loops
    TE_WORKER_SCHEDULER_LOOPS names beside its claim), then drain."""
    return root.invoke(RUN_WORKER, event.context)


@bp.schedule(SCHEDULE, name=MATERIALIZE_CRON_TICKS)
def materialize_cron_ticks(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 1 for about a minute: materialize due cron ticks every TE_CRON_TICK_INTERVAL_SEC."""
    return root.invoke(MATERIALIZE_CRON_TICKS, event.context)


@bp.schedule(SCHEDULE, name=PROMOTE_DELAYED_EXECUTIONS)
def promote_delayed_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 2 for about a minute: PENDING -> QUEUED every TE_PROMOTE_INTERVAL_MS."""
    return root.invoke(PROMOTE_DELAYED_EXECUTIONS, event.context)


@bp.schedule(SCHEDULE, name=RECLAIM_STUCK_EXECUTIONS)
def reclaim_stuck_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 3 for about a minute: recover expired leases every TE_RECLAIM_INTERVAL_SEC, with
    the housekeeper and the bulk operator beside it (:data:`SCHEDULER_LOOPS`)."""
    return root.invoke(RECLAIM_STUCK_EXECUTIONS, event.context)
