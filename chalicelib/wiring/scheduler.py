"""The scheduler built from its settings (:func:`build_loop`, :func:`build_scheduler`) and
its process kinds: the long-lived process, one loop per Lambda invocation,
and the scheduler part of the local stack, each a loop group over one
:class:`~chalicelib.wiring.process.ProcessRoot`'s ``scheduler`` pool.

``python -m chalicelib.scheduler`` runs :func:`main`: SIGTERM or SIGINT lets each loop
finish its current iteration, a final ``DEAD`` heartbeat is written, and the process exits
0. A loop whose iteration fails backs off, and one whose thread dies is restarted by the
group (:mod:`chalicelib.runtime.group`); the process exits 1 only if a loop died on a
``SystemExit``-like exception. Several such processes may run at once: every loop is
idempotent, no leader election is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.domain.clock import Clock, utcnow
from chalicelib.domain.regions import RegionFilter
from chalicelib.health.heartbeat import ALIVE, DEAD, SCHEDULER, HeartbeatWriter, instance_name
from chalicelib.health.region import RegionRefresher
from chalicelib.runtime.loop import LoopSpec, TimeLeft
from chalicelib.runtime.process import LoopGroupPart, ProcessRunner
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.scheduler.bulk import BULK_INTERVAL_SEC, BulkOperator
from chalicelib.scheduler.housekeeper import HOUSEKEEPING_INTERVAL_SEC, Housekeeper
from chalicelib.scheduler.lambdas import SCHEDULE_PERIOD_SEC, LambdaContext, time_left_of
from chalicelib.scheduler.loops import LOOP_NAMES, Scheduler
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
from chalicelib.wiring.process import ProcessRoot, run_until_stopped

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


def build_scheduler(
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
    return Scheduler(
        specs,
        heartbeat=heartbeat,
        final_status=final_status,
        final_next_beat_in=final_next_beat_in,
        time_left=time_left,
        registry=registry,
    )


def long_lived_part(process: ProcessRoot, loops: Sequence[str] = LOOP_NAMES) -> LoopGroupPart:
    """Every loop plus the health stubs, a final DEAD heartbeat when stopped."""
    scheduler = build_scheduler(
        process.settings, process.database("scheduler"), loops=loops, clock=process.clock
    )
    return LoopGroupPart("scheduler", scheduler)


def main() -> int:
    """``python -m chalicelib.scheduler``: run every loop until SIGTERM/SIGINT."""
    return run_until_stopped("scheduler", long_lived_part)


def invoke(
    process: ProcessRoot, loop: str, context: LambdaContext, *, beside: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One scheduled invocation: ``loop`` (plus ``beside`` and the health stubs) until the
    invocation is nearly out of time; a summary of ``loop``'s iterations."""
    process.configure_logging()
    scheduler = build_scheduler(
        process.settings,
        process.database("scheduler"),
        loops=[loop, *beside],
        clock=process.clock,
        component=f"scheduler/{loop}",
        # Not dead: the next invocation comes within the schedule's period.
        final_status=ALIVE,
        final_next_beat_in=SCHEDULE_PERIOD_SEC,
        time_left=time_left_of(context),
    )
    part = LoopGroupPart("scheduler", scheduler)
    outcome = ProcessRunner([part], name="scheduler", announce=False).run()
    for failure in outcome.failures.values():
        raise failure
    own = scheduler.stats[loop]
    return {
        "loop": loop,
        "iterations": own.iterations,
        "count": own.total,
        "failures": own.failures,
    }
