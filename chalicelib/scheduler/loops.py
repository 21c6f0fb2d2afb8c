"""The scheduler: its loops wired to their settings, run in threads until stopped.

One :class:`Scheduler` runs any subset of the five loops plus the health stubs (heartbeat
writer, region status refresher) as a :class:`~chalicelib.runtime.group.LoopGroup`, each
loop in its own thread. The
long-lived process runs all of them; each scheduled Lambda function runs one loop (plus the
stubs) until its invocation's time is nearly spent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from chalicelib.db.connection import Database
from chalicelib.domain.clock import Clock, utcnow
from chalicelib.domain.regions import RegionFilter
from chalicelib.health.heartbeat import DEAD, SCHEDULER, HeartbeatWriter, instance_name
from chalicelib.health.region import RegionRefresher
from chalicelib.runtime.group import LoopGroup
from chalicelib.runtime.loop import LoopClock, LoopSpec, TimeLeft
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.scheduler.bulk import BULK_INTERVAL_SEC, BulkOperator
from chalicelib.scheduler.housekeeper import HOUSEKEEPING_INTERVAL_SEC, Housekeeper
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.names import (
    BULK_OPERATOR,
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)
from chalicelib.scheduler.promoter import DelayedPromoter
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services.operations import OperationService
from chalicelib.settings import Settings

LOOP_NAMES = (CRON_MATERIALIZER, DELAYED_PROMOTER, STUCK_RECLAIMER, HOUSEKEEPER, BULK_OPERATOR)

Regions = Callable[[], RegionFilter]


def build_loop(
    name: str, settings: Settings, db: Database, clock: Clock, regions: Regions
) -> LoopSpec:
    """The loop ``name`` with its interval and batch size from ``settings``."""
    if name == CRON_MATERIALIZER:
        # Look-ahead of one interval: ticks due before the next iteration are queued now.
        materializer = CronMaterializer(
            db,
            batch_size=settings.cron_batch_size,
            lookahead=timedelta(seconds=settings.cron_tick_interval_sec),
            clock=clock,
            regions=regions,
            wakeup_notify=settings.wakeup_notify,
        )
        return LoopSpec(
            name=name,
            interval_sec=settings.cron_tick_interval_sec,
            iteration=materializer.run_once,
            metric_event="cron_ticks_materialized",
        )
    if name == DELAYED_PROMOTER:
        # Look-ahead of one interval: rows due before the next iteration are queued now.
        interval = timedelta(milliseconds=settings.promote_interval_ms)
        promoter = DelayedPromoter(
            db,
            lookahead=interval,
            clock=clock,
            regions=regions,
            wakeup_notify=settings.wakeup_notify,
        )
        return LoopSpec(
            name=name,
            interval_sec=interval.total_seconds(),
            iteration=promoter.run_once,
            metric_event="delayed_promoted",
        )
    if name == STUCK_RECLAIMER:
        reclaimer = StuckReclaimer(
            db, timeout_sec=settings.stuck_execution_timeout_sec, clock=clock, regions=regions
        )
        return LoopSpec(
            name=name,
            interval_sec=settings.reclaim_interval_sec,
            iteration=reclaimer.run_once,
            metric_event="reclaimed",
        )
    if name == HOUSEKEEPER:
        housekeeper = Housekeeper(
            db,
            retention_days=settings.execution_retention_days,
            operation_retention_days=settings.operation_retention_days,
            clock=clock,
            operator_endpoint=settings.operator_endpoint,
        )
        return LoopSpec(
            name=name,
            interval_sec=HOUSEKEEPING_INTERVAL_SEC,
            iteration=housekeeper.run_once,
            metric_event="history_purged",
        )
    if name == BULK_OPERATOR:
        service = OperationService(
            db, page_size=settings.bulk_page_size, wakeup_notify=settings.wakeup_notify
        )
        return LoopSpec(
            name=name,
            interval_sec=BULK_INTERVAL_SEC,
            iteration=BulkOperator(service).run_once,
            metric_event="bulk_page",
        )
    raise ValueError(f"unknown scheduler loop {name!r}; expected one of {LOOP_NAMES}")


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

    @classmethod
    def build(
        cls,
        settings: Settings,
        db: Database,
        *,
        loops: Sequence[str] = LOOP_NAMES,
        clock: Clock = utcnow,
        component: str | None = None,
        final_status: str | None = DEAD,
        final_next_beat_in: float | None = None,
        time_left: TimeLeft | None = None,
    ) -> Scheduler:
        """The named loops, the heartbeat writer and the region refresher over ``db``; the
        heartbeat reports every loop's state (``registry``)."""
        refresher = RegionRefresher(db)
        registry = LoopRegistry(clock)
        heartbeat = HeartbeatWriter(
            db,
            kind=SCHEDULER,
            component=component or instance_name("scheduler"),
            region=settings.region,
            clock=clock,
            metadata={"loops": list(loops)},
            registry=registry,
        )
        specs = [build_loop(n, settings, db, clock, refresher.region_filter) for n in loops]
        specs += [heartbeat.loop_spec(), refresher.loop_spec()]
        return cls(
            specs,
            heartbeat=heartbeat,
            final_status=final_status,
            final_next_beat_in=final_next_beat_in,
            time_left=time_left,
            registry=registry,
        )
