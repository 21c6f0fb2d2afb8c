"""Loop 1: the cron tick materializer.

Every ``TE_CRON_TICK_INTERVAL_SEC`` it scans up to ``TE_CRON_BATCH_SIZE`` ACTIVE cron jobs due
within the look-ahead and materializes their ticks in rounds: each round is ONE statement
for the whole batch (``scheduler_cron_apply_ticks``) that, for every job, advances
``cron_next_run_at`` by compare-and-set on its current tick and inserts that tick's QUEUED
execution (idempotency key ``cron_<job_id>_<epoch_ms>``). A batch of jobs due at the same
tick therefore costs one round trip and one commit, not one per job. Further rounds only
happen for jobs catching up on missed ticks.

Look-ahead (``lookahead``; the service passes ``TE_CRON_TICK_INTERVAL_SEC`` itself, there is
no separate setting): a tick due before the next iteration is materialized now, QUEUED with
``run_at`` = the tick. The worker's claim requires ``run_at <= now()``, so it fires at the
tick, not one iteration after it. Retiring a job (cancel, or PUT replacing it) cancels its
QUEUED executions whose ``run_at`` is still ahead, so a retired job does not fire a tick
materialized early. After a round that created executions a NOTIFY
(:mod:`chalicelib.db.notify`) is published in the same transaction; polling stays the
fallback.

Guarantees, with any number of schedulers running at once:

* exactly one execution per tick: the CAS lets one scheduler win each tick, and the unique
  ``(job_id, idempotency_key)`` index turns any replay into a no-op;
* no tick skipped: the next tick is computed from the current tick, never from now, so
  ticks missed while no scheduler ran are materialized in order (catch-up), at most
  ``max_ticks_per_job`` per job per iteration before the loop comes straight back;
* a retired job never ticks again, even if retired between the due scan and the insert:
  the execution is inserted only from the row the CAS updated, which requires ACTIVE
  (a job locked by another writer at that moment is skipped and left to the next
  iteration, so two schedulers never wait on each other);
* ``starts_at``: a tick before it is not materialized; the job moves to its first tick at
  or after ``starts_at``;
* ``ends_at``: a tick at or after it is not materialized. After the last tick before it,
  ``cron_next_run_at`` becomes ``ends_at`` itself, the job's retirement tick (the API shows
  ``next_run_at: null``). Once ``ends_at`` has passed (not merely entered the look-ahead),
  the same compare-and-set retires the job: RETIRED, ``retired_at = ends_at``, one
  ``cron_job_ended`` log line from the scheduler that won it. Missed ticks *before*
  ``ends_at`` are still caught up.
* DST (``chalicelib.domain.cron``): a local time that does not exist is skipped, one that
  occurs twice fires once, at its first occurrence;
* no job can stop the others: a job whose row cannot be read or planned (an expression or
  time zone the code cannot evaluate, an expression longer than the API accepts, which
  would cost every pass seconds, a value of an unexpected type), or whose plan the
  round's statement refuses (the round is then applied plan by plan to find it), is set
  aside at the end of the iteration: ``cron_next_run_at`` NULL (out of the due scan for
  good, so a batch full of such jobs cannot starve the rest), ``schedule_error`` saying
  why (GET /jobs/{id}; /status reports it FAILING) and one ``cron_job_unschedulable`` log
  line. Only a failure a row can cause sets a job aside (the code's own exception, or a
  refusal of SQLSTATE class 22/23: :func:`~chalicelib.db.faults.is_row_fault`); any other
  (the database away, a permission) is not a job's fault: the iteration fails and the
  loop retries it after its back-off, reporting itself failing.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.db import notify
from chalicelib.db.connection import Database, Transaction
from chalicelib.db.faults import is_row_fault
from chalicelib.db.queries import queries, regional
from chalicelib.domain.clock import utcnow
from chalicelib.domain.cron import first_tick, next_tick, render_local, stored_zone
from chalicelib.domain.loops import fault_reason
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.logs import log_event
from chalicelib.runtime.loop import Progress
from chalicelib.services import keys

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
            zone=stored_zone(row["cron_timezone"]),
            starts_at=row["cron_starts_at"],
            ends_at=row["cron_ends_at"],
            next_run_at=row["cron_next_run_at"],
        )


class TickAction(Enum):
    """What the materializer does with one due tick."""

    MATERIALIZE = "materialize"  #: create the execution and advance to the next tick
    EXHAUST = "exhaust"  #: the tick is at/after ends_at: no execution; retire the job
    SKIP_TO_START = "skip_to_start"  #: the tick precedes starts_at: move to the first tick


@dataclass(frozen=True)
class TickPlan:
    """The decision for one tick: the action and the value the CAS moves to."""

    action: TickAction
    tick: datetime
    next_tick: datetime | None


# Jobs sharing an expression and zone share their ticks (a batch of 200 "* * * * *" jobs due
# at one tick needs one cron evaluation, not 200); next_tick is pure, so caching is safe.
# Bounded in bytes as in entries: next_tick refuses an expression longer than
# cron.MAX_CRON_LENGTH (one stored before the limit raises, is never cached, and its job is
# set aside with the reason), so a key holds at most 256 characters of it.
_next_tick = functools.lru_cache(maxsize=4096)(next_tick)
_first_tick = functools.lru_cache(maxsize=1024)(first_tick)


def plan_tick(job: DueJob, tick: datetime) -> TickPlan:
    """Decide what to do with ``tick`` of ``job`` (pure: no clock, no database)."""
    if job.ends_at is not None and tick >= job.ends_at:
        return TickPlan(TickAction.EXHAUST, tick, None)
    if job.starts_at is not None and tick < job.starts_at:
        start = _first_tick(job.expression, job.zone, job.starts_at)
        return TickPlan(TickAction.SKIP_TO_START, tick, _before_end(job, start))
    following = _next_tick(job.expression, job.zone, tick)
    return TickPlan(TickAction.MATERIALIZE, tick, _before_end(job, following))


def _before_end(job: DueJob, tick: datetime) -> datetime:
    """``tick``, or ``ends_at`` (the retirement tick) when the schedule ends first."""
    return job.ends_at if job.ends_at is not None and tick >= job.ends_at else tick


#: One round: each job (at most once) with the plan for its current tick.
Plans = list[tuple[DueJob, TickPlan]]

#: Jobs of this iteration that cannot be scheduled: job_id -> why (set aside at its end).
Faults = dict[str, str]


class CronMaterializer:
    """Materializes due cron ticks; one :meth:`run_once` per loop iteration."""

    def __init__(
        self,
        db: Database,
        *,
        batch_size: int = 100,
        max_ticks_per_job: int = 100,
        lookahead: timedelta = timedelta(0),
        clock: Callable[[], datetime] = utcnow,
        regions: Callable[[], RegionFilter] = lambda: ALL_REGIONS,
        before_tick: BeforeTick | None = None,
        wakeup_notify: str = notify.AUTO,
    ) -> None:
        if lookahead < timedelta(0):
            raise ValueError("lookahead must not be negative")
        self._db = db
        self._batch_size = batch_size
        self._max_ticks_per_job = max_ticks_per_job
        self._lookahead = lookahead
        self._clock = clock
        self._regions = regions
        self._before_tick = before_tick
        self._wakeup_notify = wakeup_notify

    def run_once(self) -> Progress:
        """Materialize the ticks of up to ``batch_size`` jobs due by now plus the look-ahead."""
        now = self._clock()
        horizon = now + self._lookahead
        sql, params = regional(queries["scheduler_cron_due_jobs"], self._regions())
        rows = self._db.run(sql, now=horizon, batch=self._batch_size, **params)
        faults: Faults = {}
        jobs = [job for job in (_load(row, faults) for row in rows) if job is not None]
        created, still_due = self.materialize(jobs, horizon, now=now, faults=faults)
        # A full batch that made progress (or set a job aside) may hide more due jobs
        # behind it: come back at once.
        more = still_due or (len(rows) >= self._batch_size and (created > 0 or bool(faults)))
        return Progress(created, more, {"set_aside": len(faults)} if faults else {})

    def materialize(
        self,
        jobs: list[DueJob],
        horizon: datetime,
        *,
        now: datetime | None = None,
        faults: Faults | None = None,
    ) -> tuple[int, bool]:
        """Materialize the jobs' ticks up to ``horizon``: (executions created, still due).

        A job whose schedule ended is retired once ``now`` (default: ``horizon``) has
        reached its ``ends_at``, never ahead of it. A job that cannot be scheduled (in
        ``faults`` already, or failing here) is set aside (:meth:`set_aside`).
        """
        faults = {} if faults is None else faults
        result = self._rounds(jobs, horizon, horizon if now is None else now, faults)
        self.set_aside(faults)
        return result

    def _rounds(
        self, jobs: list[DueJob], horizon: datetime, now: datetime, faults: Faults
    ) -> tuple[int, bool]:
        current: dict[str, tuple[DueJob, datetime | None]] = {
            job.job_id: (job, job.next_run_at) for job in jobs
        }
        created = 0
        for _ in range(self._max_ticks_per_job):
            plans = _plans(current.values(), horizon, now, faults)
            if not plans:
                return created, False
            won = self._apply_isolated(plans, faults)
            created += sum(won.values())
            _report_ended(plans, won)
            # A lost CAS: another scheduler advanced that job (or it was retired or is
            # being written): it owns the rest of that job's ticks.
            current = {
                job.job_id: (job, plan.next_tick) for job, plan in plans if job.job_id in won
            }
        return created, any(t is not None and t <= horizon for _, t in current.values())

    def _apply_isolated(self, plans: Plans, faults: Faults) -> dict[str, bool]:
        """:meth:`apply`; if the round fails in a way a row can cause, each plan on its own,
        so the job whose plan the statement refuses is set aside and the others go on."""
        try:
            return self.apply(plans)
        except Exception as exc:
            if not is_row_fault(exc):
                raise  # an outage, or the same for every job: the loop fails and reports
            if len(plans) == 1:
                faults[plans[0][0].job_id] = fault_reason(exc)
                return {}
        won: dict[str, bool] = {}
        for plan in plans:
            won.update(self._apply_isolated([plan], faults))
        return won

    def apply(self, plans: Plans) -> dict[str, bool]:
        """Apply one round by CAS: {job_id: an execution was inserted} for the CAS winners."""
        if self._before_tick is not None:
            for job, plan in plans:
                self._before_tick(job.job_id, plan.tick)
        params = _statement_params(plans)
        # Decided outside the transaction: the first call may read the server version.
        notifying = notify.enabled(self._db, self._wakeup_notify)
        recorded_at = self._clock()

        def work(tx: Transaction) -> dict[str, bool]:
            rows = tx.run(queries["scheduler_cron_apply_ticks"], **params)
            won = {row["job_id"]: row["execution_id"] is not None for row in rows}
            # A keyed job's tick waits for its key's turn: settle those keys here.
            keys.created_rows(tx, rows)
            created = sum(won.values())
            if created:  # GET /metrics counts materialized ticks from this row (metrics.sql)
                tx.execute(
                    queries["metrics_record_event"],
                    event="cron_ticks_materialized",
                    now=recorded_at,
                    amount=created,
                )
            if notifying and created:
                notify.publish(tx, self._db, self._wakeup_notify)
            return won

        return self._db.transaction(work, name="scheduler_cron_apply_ticks")

    def set_aside(self, faults: Faults) -> None:
        """Take the jobs in ``faults`` out of the due scan, recording why (one statement).

        ``cron_next_run_at`` becomes NULL, so idx_jobs_cron_due never returns the job again
        and it cannot hold a batch position that schedulable jobs need; ``schedule_error``
        shows why on GET /jobs/{id} (and /status reports the job FAILING). One log line
        per job, from the scheduler whose statement set it aside.
        """
        if not faults:
            return
        ids = sorted(faults)
        rows = self._db.run(
            queries["scheduler_cron_set_aside"],
            job_ids=ids,
            errors=[faults[job_id] for job_id in ids],
        )
        for row in rows:
            log_event(
                log,
                "cron_job_unschedulable",
                logging.ERROR,
                job_id=row["job_id"],
                error=faults[row["job_id"]],
            )


def _load(row: dict[str, Any], faults: Faults) -> DueJob | None:
    """The job's scheduling fields, or None (and a fault) if they cannot be read."""
    try:
        return DueJob.from_row(row)
    except Exception as exc:  # this row only: set aside, the batch goes on
        faults[str(row["job_id"])] = fault_reason(exc)
        return None


def _plans(
    current: Iterable[tuple[DueJob, datetime | None]],
    horizon: datetime,
    now: datetime,
    faults: Faults,
) -> Plans:
    plans: Plans = []
    for job, tick in current:
        try:
            plan = _plan_due(job, tick, horizon, now)
        except Exception as exc:  # this job only: it is set aside, the round goes on
            faults[job.job_id] = fault_reason(exc)
            continue
        if plan is not None:
            plans.append((job, plan))
    return plans


def _plan_due(
    job: DueJob, tick: datetime | None, horizon: datetime, now: datetime
) -> TickPlan | None:
    """The plan for a job's current tick, or None if nothing is due yet.

    Everything the round's statement needs from the plan is computed here (its key and
    log message too), so a value the code cannot handle fails this job, not the round.
    """
    if tick is None or tick > horizon:
        return None
    plan = plan_tick(job, tick)
    # Ticks are materialized ahead (look-ahead); a retirement waits for ends_at itself.
    if plan.action is TickAction.EXHAUST and tick > now:
        return None
    _statement_row(job, plan)
    return plan


def _report_ended(plans: Plans, won: dict[str, bool]) -> None:
    """One log line per job this scheduler retired at its ends_at (CAS winners only)."""
    for job, plan in plans:
        if plan.action is TickAction.EXHAUST and job.job_id in won:
            log_event(log, "cron_job_ended", job_id=job.job_id, ends_at=_iso(job.ends_at))


def _statement_row(job: DueJob, plan: TickPlan) -> tuple[str, str | None, str, str, str]:
    """(tick, next tick, materialize flag, idempotency key, log message) of one plan."""
    materialize = "true" if plan.action is TickAction.MATERIALIZE else "false"
    message = f"Cron tick {render_local(plan.tick, job.zone)} materialized; execution QUEUED."
    return (
        plan.tick.isoformat(),
        _iso(plan.next_tick),
        materialize,
        cron_idempotency_key(job.job_id, plan.tick),
        message,
    )


def _statement_params(plans: Plans) -> dict[str, list[Any]]:
    """The round as parallel arrays (see ``scheduler_cron_apply_ticks``)."""
    rows = [_statement_row(job, plan) for job, plan in plans]
    return {
        "job_ids": [job.job_id for job, _ in plans],
        "ticks": [row[0] for row in rows],
        "next_ticks": [row[1] for row in rows],
        "materialize": [row[2] for row in rows],
        "keys": [row[3] for row in rows],
        "messages": [row[4] for row in rows],
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
