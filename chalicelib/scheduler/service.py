"""The scheduler: its loops wired to their settings, run in threads until stopped.

One :class:`Scheduler` runs any subset of the four loops plus the health stubs (heartbeat
writer, region status refresher), each in its own thread with :func:`run_loop`. The
long-lived process runs all of them; each scheduled Lambda function runs one loop (plus the
stubs) until its invocation's time is nearly spent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from chalicelib.db.connection import Database
from chalicelib.domain.regions import RegionFilter
from chalicelib.errors import TaskExecutorError
from chalicelib.health.heartbeat import DEAD, HeartbeatWriter, instance_name
from chalicelib.health.region import RegionRefresher
from chalicelib.logs import log_event
from chalicelib.scheduler.housekeeper import HOUSEKEEPING_INTERVAL_SEC, Housekeeper
from chalicelib.scheduler.loop import LoopClock, LoopSpec, LoopStats, TimeLeft, run_loop
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.names import (
    CRON_MATERIALIZER,
    DELAYED_PROMOTER,
    HOUSEKEEPER,
    STUCK_RECLAIMER,
)
from chalicelib.scheduler.promoter import DelayedPromoter
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.settings import Settings
from chalicelib.wiring import utcnow

log = logging.getLogger(__name__)

LOOP_NAMES = (CRON_MATERIALIZER, DELAYED_PROMOTER, STUCK_RECLAIMER, HOUSEKEEPER)

# How often the main thread looks at the caller's stop event.
_WATCH_INTERVAL_SEC = 0.2

Clock = Callable[[], datetime]
Regions = Callable[[], RegionFilter]


class SchedulerLoopCrashed(TaskExecutorError):
    """A loop thread ended on an unexpected exception (its traceback is in the log)."""


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
        promoter = DelayedPromoter(db, lookahead=interval, clock=clock, regions=regions)
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
        housekeeper = Housekeeper(db, retention_days=settings.execution_retention_days, clock=clock)
        return LoopSpec(
            name=name,
            interval_sec=HOUSEKEEPING_INTERVAL_SEC,
            iteration=housekeeper.run_once,
            metric_event="history_purged",
        )
    raise ValueError(f"unknown scheduler loop {name!r}; expected one of {LOOP_NAMES}")


class Scheduler:
    """Runs loops in threads; :meth:`run` returns when stopped or out of time."""

    def __init__(
        self,
        loops: Sequence[LoopSpec],
        *,
        heartbeat: HeartbeatWriter | None = None,
        final_status: str | None = DEAD,
        time_left: TimeLeft | None = None,
        loop_clock: LoopClock | None = None,
    ) -> None:
        self.loops = list(loops)
        self.heartbeat = heartbeat
        self._final_status = final_status
        self._time_left = time_left
        self._loop_clock = loop_clock
        self.stats: dict[str, LoopStats] = {}
        self.crashes: dict[str, BaseException] = {}

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
        time_left: TimeLeft | None = None,
    ) -> Scheduler:
        """The named loops, the heartbeat writer and the region refresher over ``db``."""
        refresher = RegionRefresher(db)
        heartbeat = HeartbeatWriter(
            db,
            component=component or instance_name("scheduler"),
            region=settings.region,
            clock=clock,
            metadata={"loops": list(loops)},
        )
        specs = [build_loop(n, settings, db, clock, refresher.region_filter) for n in loops]
        specs += [heartbeat.loop_spec(), refresher.loop_spec()]
        return cls(specs, heartbeat=heartbeat, final_status=final_status, time_left=time_left)

    def run(self, stop: threading.Event) -> dict[str, LoopStats]:
        """Run every loop until ``stop`` is set or time runs out; each finishes its iteration.

        Raises :class:`SchedulerLoopCrashed` if a loop died on an unexpected exception (the
        other loops are stopped first, so a supervisor can restart the whole process).
        """
        halt = threading.Event()
        threads = [
            threading.Thread(target=self._run_one, args=(spec, halt), name=f"te-{spec.name}")
            for spec in self.loops
        ]
        for thread in threads:
            thread.start()
        while not halt.is_set() and any(t.is_alive() for t in threads):
            if stop.wait(_WATCH_INTERVAL_SEC):
                break
        halt.set()
        for thread in threads:
            thread.join()
        self._final_heartbeat()
        if self.crashes:
            names = ", ".join(self.crashes)
            raise SchedulerLoopCrashed(f"scheduler loops crashed: {names}") from next(
                iter(self.crashes.values())
            )
        return self.stats

    def _run_one(self, spec: LoopSpec, halt: threading.Event) -> None:
        try:
            self.stats[spec.name] = run_loop(
                spec, halt, time_left=self._time_left, clock=self._loop_clock
            )
        except BaseException as exc:
            # Not swallowed: handed to the thread that called run(), which raises it.
            log.exception("scheduler loop %s crashed", spec.name)
            self.crashes[spec.name] = exc
        finally:
            # One loop ending (deadline, or a crash) ends them all: the process restarts
            # or the invocation returns as a whole.
            halt.set()

    def _final_heartbeat(self) -> None:
        if self.heartbeat is None or self._final_status is None:
            return
        try:
            self.heartbeat.beat(self._final_status)
        except TaskExecutorError as exc:
            log_event(log, "heartbeat_failed", logging.WARNING, error=str(exc))
