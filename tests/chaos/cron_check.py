"""Cron jobs seeded with missed ticks, and the check that each tick ran exactly once."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.domain.cron import next_tick, parse_timezone
from tests.support.seed.worker import retry_policy, seed

CRON = "* * * * *"
ZONE = "UTC"
MISSED_MINUTES = 10


def seed_cron_jobs(
    db: Database,
    count: int,
    spec: dict[str, Any],
    *,
    policy: dict[str, Any] | None = None,
    missed_minutes: int = MISSED_MINUTES,
) -> datetime:
    """``count`` ACTIVE cron jobs (HTTP ``spec``) all due since the same whole minute,
    ``missed_minutes`` ago; returns that first tick."""
    seeded = seed(db, spec=spec, policy=policy or retry_policy(), count=1)
    # Only the endpoint and its snapshot are wanted from the seeded IMMEDIATE job.
    db.run("DELETE FROM execution_logs WHERE execution_id = :id", id=seeded.execution_id)
    db.run("DELETE FROM executions WHERE execution_id = :id", id=seeded.execution_id)
    first = db.run(
        "SELECT date_trunc('minute', now()) - make_interval(mins => :m) AS t", m=missed_minutes
    )[0]["t"]
    db.run(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, input, cron_expression, "
        "cron_timezone, cron_next_run_at, endpoint_snapshot) "
        "SELECT :endpoint, 'HTTP', 'CRON', CAST(:input AS JSONB), :cron, :zone, :first, "
        "(SELECT endpoint_snapshot FROM jobs WHERE job_id = :template) "
        "FROM generate_series(1, :count)",
        endpoint=seeded.endpoint,
        input=json.dumps({"user_id": "cron"}),
        cron=CRON,
        zone=ZONE,
        first=first,
        template=seeded.job_id,
        count=count,
    )
    db.run("DELETE FROM jobs WHERE job_id = :id", id=seeded.job_id)
    return first


def due_jobs(db: Database) -> tuple[int, datetime]:
    row = db.run(
        "SELECT count(*) FILTER (WHERE cron_next_run_at <= now()) AS due, now() AS at "
        "FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE'"
    )[0]
    return int(row["due"]), row["at"]


def expected_ticks(first: datetime, until: datetime) -> list[datetime]:
    """The schedule's ticks from ``first`` (included) to ``until`` (excluded)."""
    zone, ticks, tick = parse_timezone(ZONE), [], first
    while tick < until:
        ticks.append(tick)
        tick = next_tick(CRON, zone, tick)
    return ticks


def tick_of(idempotency_key: str) -> datetime:
    """The tick a cron execution was made for, from its key ``cron_<job_id>_<epoch_ms>``
    (``run_at`` moves when the execution is retried)."""
    return datetime.fromtimestamp(int(idempotency_key.rsplit("_", 1)[1]) / 1000, UTC)


@dataclass
class CronCheck:
    """Deviations of the materialized ticks from the schedules (all 0 when correct)."""

    duplicated: int = 0  #: executions beyond one per (job, tick)
    skipped: int = 0  #: ticks of the schedule without an execution
    unexpected: int = 0  #: executions for instants that are not ticks of the schedule
    not_caught_up: int = 0  #: jobs whose next tick was still due at the catch-up instant
    ticks_per_job: dict[int, int] = field(default_factory=dict)  #: ticks -> number of jobs

    def figures(self) -> dict[str, Any]:
        return asdict(self)


def check_jobs(db: Database, first: datetime, caught_up_at: datetime) -> CronCheck:
    """Compare every job's executions with its schedule from ``first`` to its next tick."""
    jobs = db.run("SELECT job_id, cron_next_run_at FROM jobs WHERE trigger_type = 'CRON'")
    rows = db.run(
        "SELECT e.job_id, e.idempotency_key FROM executions e JOIN jobs j USING (job_id) "
        "WHERE j.trigger_type = 'CRON'"
    )
    ticks: dict[str, Counter[datetime]] = defaultdict(Counter)
    for row in rows:
        ticks[row["job_id"]][tick_of(row["idempotency_key"])] += 1
    check, per_job = CronCheck(), Counter[int]()
    for job in jobs:
        expected = set(expected_ticks(first, job["cron_next_run_at"]))
        seen = ticks[job["job_id"]]
        check.duplicated += sum(n - 1 for n in seen.values())
        check.skipped += len(expected - set(seen))
        check.unexpected += len(set(seen) - expected)
        check.not_caught_up += int(job["cron_next_run_at"] <= caught_up_at)
        per_job[len(seen)] += 1
    check.ticks_per_job = dict(sorted(per_job.items()))
    return check
