"""Scheduled Lambda functions of the scheduler (EventBridge ``rate(1 minute)``).

EventBridge cannot fire more often than once a minute, so each function runs its loop at
its own sub-minute interval (1 s, 500 ms, 30 s by default) until the invocation's remaining
time drops below a margin, then returns a summary. The heartbeat writer and the region
refresher run beside the loop for the duration of the invocation. Invocations may overlap
(the Lambda timeout is longer than the minute): every loop is idempotent.
"""

from __future__ import annotations

from typing import Any, Protocol

from chalice import Blueprint
from chalice.app import CloudWatchEvent

from chalicelib.runtime.loop import TimeLeft
from chalicelib.scheduler.names import (
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)

bp = Blueprint(__name__)

SCHEDULE = "rate(1 minute)"

# The margin kept before the invocation's deadline: a fifth of the time the invocation had
# when it started, within these bounds. It must cover one iteration plus returning.
MIN_MARGIN_SEC = 0.5
MAX_MARGIN_SEC = 5.0


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> float: ...


def deadline_margin(initial_remaining_sec: float) -> float:
    """Seconds to keep in reserve, given the time the invocation had at its start."""
    return min(MAX_MARGIN_SEC, max(MIN_MARGIN_SEC, initial_remaining_sec / 5))


def time_left_of(context: LambdaContext) -> TimeLeft:
    """Seconds the loops may still start iterations in: remaining time minus the margin."""
    margin = deadline_margin(context.get_remaining_time_in_millis() / 1000)
    return lambda: context.get_remaining_time_in_millis() / 1000 - margin


def run_invocation(loop: str, context: Any, *, beside: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run ``loop`` (plus ``beside`` and the health stubs) until nearly out of time."""
    import threading

    from chalicelib import wiring
    from chalicelib.scheduler.service import Scheduler

    wiring.configure_logging()
    scheduler = Scheduler.build(
        wiring.settings(),
        wiring.database("scheduler"),
        loops=[loop, *beside],
        clock=wiring.utcnow,
        component=f"scheduler/{loop}",
        final_status=None,  # the next invocation comes within a minute: not dead
        time_left=time_left_of(context),
    )
    stats = scheduler.run(threading.Event())
    own = stats[loop]
    return {
        "loop": loop,
        "iterations": own.iterations,
        "count": own.total,
        "failures": own.failures,
    }


@bp.schedule(SCHEDULE, name="materialize_cron_ticks")
def materialize_cron_ticks(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 1 for about a minute: materialize due cron ticks every TE_CRON_TICK_INTERVAL_SEC."""
    return run_invocation(CRON_MATERIALIZER, event.context)


@bp.schedule(SCHEDULE, name="promote_delayed_executions")
def promote_delayed_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 2 for about a minute: PENDING -> QUEUED every TE_PROMOTE_INTERVAL_MS."""
    return run_invocation(DELAYED_PROMOTER, event.context)


@bp.schedule(SCHEDULE, name="reclaim_stuck_executions")
def reclaim_stuck_executions(event: CloudWatchEvent) -> dict[str, Any]:
    """Loop 3 for about a minute: recover expired leases every TE_RECLAIM_INTERVAL_SEC.

    The housekeeper (loop 4: retention purge, heartbeat pruning) runs beside it: both are
    slow, periodic and idempotent, and sharing the function keeps the deployment at three
    scheduled functions.
    """
    return run_invocation(STUCK_RECLAIMER, event.context, beside=(HOUSEKEEPER,))
