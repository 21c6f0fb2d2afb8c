"""The scheduler: its loops run in threads until stopped.

One :class:`Scheduler` runs any subset of the five loops plus the health stubs (heartbeat
writer, region status refresher) as a :class:`~chalicelib.runtime.group.LoopGroup`, each
loop in its own thread. The long-lived process runs all of them; each scheduled Lambda
function runs one loop (plus the stubs) until its invocation's time is nearly spent. The
loops are built from their settings in the composition root
(:func:`chalicelib.wiring.scheduler.build_scheduler`).
"""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib.health.heartbeat import DEAD, HeartbeatWriter
from chalicelib.runtime.group import LoopGroup
from chalicelib.runtime.loop import LoopClock, LoopSpec, TimeLeft
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.scheduler.names import (
    BULK_OPERATOR,
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)

LOOP_NAMES = (CRON_MATERIALIZER, DELAYED_PROMOTER, STUCK_RECLAIMER, HOUSEKEEPER, BULK_OPERATOR)


class Scheduler(LoopGroup):
    """The scheduler's loops as a :class:`LoopGroup`; a final ``DEAD`` beat by default."""

    def __init__(
        self,
        loops: Sequence[LoopSpec],
        *,
        heartbeat: HeartbeatWriter | None = None,
        final_status: str | None = DEAD,
        final_next_beat_in: float | None = None,
        time_left: TimeLeft | None = None,
        loop_clock: LoopClock | None = None,
        registry: LoopRegistry | None = None,
    ) -> None:
        super().__init__(
            loops,
            heartbeat=heartbeat,
            final_status=final_status,
            final_next_beat_in=final_next_beat_in,
            time_left=time_left,
            loop_clock=loop_clock,
            registry=registry,
        )
