"""Loop 1: the cron tick materializer.

Every ``TE_CRON_TICK_INTERVAL_SEC`` it scans up to ``TE_CRON_BATCH_SIZE`` due ACTIVE cron
jobs and, for each, materializes its due ticks one by one: one QUEUED execution per tick
(idempotency key ``cron_<job_id>_<epoch_ms>``) and the job's ``cron_next_run_at`` advanced
by compare-and-set, both in one statement (see ``scheduler_cron_materialize_tick``).

Guarantees, with any number of schedulers running at once:

* exactly one execution per tick: the CAS lets one scheduler win each tick, and the unique
  ``(job_id, idempotency_key)`` index turns any replay into a no-op;
* no tick skipped: the next tick is computed from the current tick, never from now, so
  ticks missed while no scheduler ran are materialized in order (catch-up), at most
  ``max_ticks_per_job`` per job per iteration before the loop comes straight back;
* a retired job never ticks again, even if retired between the due scan and the insert:
  the execution is inserted only from the row the CAS updated, which requires ACTIVE;
* ``starts_at``: a tick before it is not materialized; the job moves to its first tick at
  or after ``starts_at``;
* ``ends_at``: a tick at or after it is not materialized. The job's ``cron_next_run_at``
  becomes NULL (no next run): it stays ACTIVE, since it was neither cancelled nor replaced,
  but leaves the due scan for good. Missed ticks *before* ``ends_at`` are still caught up.
* DST (``chalicelib.domain.cron``): a local time that does not exist is skipped, one that
  occurs twice fires once, at its first occurrence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.cron import first_tick, next_tick, parse_timezone, render_local
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.errors import TaskExecutorError
from chalicelib.logs import log_event
from chalicelib.scheduler.loop import Progress
from chalicelib.scheduler.regional import regional
from chalicelib.wiring import utcnow

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Called with (job_id, tick) after the due scan and before the tick's statement. Tests use
#: it to retire a job between the two phases deterministically.
BeforeTick = Callable[[str, datetime], None]


def cron_idempotency_key(job_id: str, tick: datetime) -> str:
    """The system idempotency key of a cron tick: ``cron_<job_id>_<epoch_ms>``."""
    return f"cron_{job_id}_{(tick - _EPOCH) // timedelta(milliseconds=1)}"


@dataclass(frozen=True, kw_only=True)
class DueJob:
    """The scheduling fields of a due cron job (all immutable except the next tick)."""

    job_id: str
    expression: str
    zone: ZoneInfo
    starts_at: datetime | None
    ends_at: datetime | None
    next_run_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DueJob:
        return cls(
            job_id=row["job_id"],
            expression=row["cron_expression"],
            zone=parse_timezone(row["cron_timezone"]),
            starts_at=row["cron_starts_at"],
            ends_at=row["cron_ends_at"],
            next_run_at=row["cron_next_run_at"],
        )


class TickAction(Enum):
    """What the materializer does with one due tick."""

    MATERIALIZE = "materialize"  #: create the execution and advance to the next tick
    EXHAUST = "exhaust"  #: the tick is at/after ends_at: no execution, no next tick
    SKIP_TO_START = "skip_to_start"  #: the tick precedes starts_at: move to the first tick


@dataclass(frozen=True)
class TickPlan:
    """The decision for one tick: the action and the value the CAS moves to."""

    action: TickAction
    tick: datetime
    next_tick: datetime | None


def plan_tick(job: DueJob, tick: datetime) -> TickPlan:
    """Decide what to do with ``tick`` of ``job`` (pure: no clock, no database)."""
    if job.ends_at is not None and tick >= job.ends_at:
        return TickPlan(TickAction.EXHAUST, tick, None)
    if job.starts_at is not None and tick < job.starts_at:
        start = first_tick(job.expression, job.zone, job.starts_at)
        return TickPlan(TickAction.SKIP_TO_START, tick, _before_end(job, start))
    following = next_tick(job.expression, job.zone, tick)
    return TickPlan(TickAction.MATERIALIZE, tick, _before_end(job, following))


def _plan_or_report(job: DueJob, tick: datetime) -> TickPlan | None:
    try:
        return plan_tick(job, tick)
    except ValueError as exc:
        # The API validates expressions, so this is a corrupt row: report it and leave it.
        log_event(log, "cron_job_unschedulable", logging.ERROR, job_id=job.job_id, error=str(exc))
        return None


def _before_end(job: DueJob, tick: datetime) -> datetime | None:
    return None if job.ends_at is not None and tick >= job.ends_at else tick


class CronMaterializer:
    """Materializes due cron ticks; one :meth:`run_once` per loop iteration."""

    def __init__(
        self,
        db: Database,
        *,
        batch_size: int = 100,
        max_ticks_per_job: int = 100,
        clock: Callable[[], datetime] = utcnow,
        regions: Callable[[], RegionFilter] = lambda: ALL_REGIONS,
        before_tick: BeforeTick | None = None,
    ) -> None:
        self._db = db
        self._batch_size = batch_size
        self._max_ticks_per_job = max_ticks_per_job
        self._clock = clock
        self._regions = regions
        self._before_tick = before_tick

    def run_once(self) -> Progress:
        """Materialize the due ticks of up to ``batch_size`` jobs, as of one instant."""
        now = self._clock()
        sql, params = regional(queries["scheduler_cron_due_jobs"], self._regions())
        rows = self._db.run(sql, now=now, batch=self._batch_size, **params)
        created, more = 0, False
        for row in rows:
            job = self._load(row)
            if job is None:
                continue
            made, still_due = self.catch_up(job, now)
            created += made
            more = more or still_due
        # A full batch that made progress may hide more due jobs behind it: come back at
        # once. (Without progress, e.g. a batch of corrupt rows, wait for the interval.)
        more = more or (len(rows) >= self._batch_size and created > 0)
        return Progress(created, more)

    def catch_up(self, job: DueJob, now: datetime) -> tuple[int, bool]:
        """Materialize ``job``'s ticks up to ``now``: (executions created, still due)."""
        tick: datetime | None = job.next_run_at
        created = 0
        for _ in range(self._max_ticks_per_job):
            if tick is None or tick > now:
                return created, False
            plan = _plan_or_report(job, tick)
            if plan is None:
                return created, False
            won, inserted = self.apply(job, plan)
            if not won:
                # Another scheduler advanced this job (or it was retired): it owns the rest.
                return created, False
            created += inserted
            tick = plan.next_tick
        return created, tick is not None and tick <= now

    def apply(self, job: DueJob, plan: TickPlan) -> tuple[bool, bool]:
        """Apply one plan by CAS: (won the CAS, inserted an execution)."""
        if self._before_tick is not None:
            self._before_tick(job.job_id, plan.tick)
        if plan.action is not TickAction.MATERIALIZE:
            moved = self._db.execute(
                queries["scheduler_cron_move_tick"],
                job_id=job.job_id,
                tick=plan.tick,
                next_tick=plan.next_tick,
            )
            return moved > 0, False
        message = f"Cron tick {render_local(plan.tick, job.zone)} materialized; execution QUEUED."
        row = self._db.transaction(
            lambda tx: tx.one(
                queries["scheduler_cron_materialize_tick"],
                job_id=job.job_id,
                tick=plan.tick,
                next_tick=plan.next_tick,
                idempotency_key=cron_idempotency_key(job.job_id, plan.tick),
                message=message,
            ),
            name="scheduler_cron_materialize_tick",
        )
        assert row is not None  # the statement always returns one row
        return row["advanced"] > 0, row["execution_id"] is not None

    def _load(self, row: dict[str, Any]) -> DueJob | None:
        try:
            return DueJob.from_row(row)
        except TaskExecutorError as exc:
            # Only the API writes jobs and it validates them; a row that still cannot be
            # scheduled is reported and left alone rather than blocking the whole batch.
            log_event(
                log, "cron_job_unschedulable", logging.ERROR, job_id=row["job_id"], error=str(exc)
            )
            return None
