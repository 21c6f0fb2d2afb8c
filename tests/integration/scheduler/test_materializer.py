"""The cron tick materializer against real PostgreSQL at SERIALIZABLE, with a fake clock."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from chalicelib.db import notify
from chalicelib.db.connection import ConnectionParams, Database
from chalicelib.domain.cron import MAX_CRON_LENGTH, next_tick
from chalicelib.scheduler import materializer
from chalicelib.scheduler.materializer import (
    CronMaterializer,
    DueJob,
    TickAction,
    TickPlan,
    cron_idempotency_key,
)
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import (
    T0,
    executions_of,
    job,
    logs_of,
    retire,
    seed_cron_job,
    seed_endpoint,
    utc,
)

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

MINUTE = timedelta(minutes=1)


@pytest.fixture
def endpoint(database: Database) -> str:
    return seed_endpoint(database)


def run_times(db: Database, job_id: str) -> list[datetime]:
    return [row["run_at"] for row in executions_of(db, job_id)]


def minutes(start: datetime, count: int) -> list[datetime]:
    return [start + timedelta(minutes=i) for i in range(count)]


def test_spec_catch_up_example_one_tick_per_iteration(database: Database, endpoint: str) -> None:
    # "Scheduler was down from 09:00 to 09:10": iterations 1-11 each materialize one tick
    # and advance by one minute, iteration 12 finds 09:11 not yet due.
    job_id = seed_cron_job(database, next_run_at=utc("2026-03-16T09:00"))
    clock = FakeClock(utc("2026-03-16T09:10:30"))
    materializer = CronMaterializer(database, clock=clock, max_ticks_per_job=1)
    progress = [materializer.run_once() for _ in range(12)]
    assert [p.count for p in progress] == [1] * 11 + [0]
    assert [p.more for p in progress] == [True] * 10 + [False, False]
    assert run_times(database, job_id) == minutes(utc("2026-03-16T09:00"), 11)
    row = job(database, job_id)
    assert row["cron_next_run_at"] == utc("2026-03-16T09:11")
    assert row["cron_last_tick_at"] == utc("2026-03-16T09:10")
    assert row["status"] == "ACTIVE"


def test_materialized_execution_is_queued_with_key_input_attempts_and_log(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(
        database, timezone="Asia/Kolkata", job_input={"user_id": "u_9"}, max_attempts=5
    )
    CronMaterializer(database, clock=FakeClock(T0)).run_once()
    [execution] = executions_of(database, job_id)
    assert execution["status"] == "QUEUED"
    assert execution["idempotency_key"] == f"cron_{job_id}_{int(T0.timestamp() * 1000)}"
    assert execution["idempotency_key"] == cron_idempotency_key(job_id, T0)
    assert execution["input"] == {"user_id": "u_9"}
    assert execution["max_attempts"] == 5
    assert execution["run_at"] == T0
    assert (execution["endpoint"], execution["endpoint_type"]) == (endpoint, "HTTP")
    [log] = logs_of(database, execution["execution_id"])
    assert (log["level"], log["attempt_number"]) == ("INFO", 0)
    assert "2026-03-16T14:30:00+05:30" in log["message"]


def test_max_attempts_defaults_to_one_without_retry_policy(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(database, max_attempts=None)
    CronMaterializer(database, clock=FakeClock(T0)).run_once()
    assert [e["max_attempts"] for e in executions_of(database, job_id)] == [1]


def test_catch_up_of_many_missed_ticks_is_bounded_per_iteration(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(database, next_run_at=T0)
    clock = FakeClock(T0 + timedelta(minutes=249))
    materializer = CronMaterializer(database, clock=clock, max_ticks_per_job=100)
    progress = [materializer.run_once() for _ in range(4)]
    assert [(p.count, p.more) for p in progress] == [
        (100, True),
        (100, True),
        (50, False),
        (0, False),
    ]
    assert run_times(database, job_id) == minutes(T0, 250)
    assert job(database, job_id)["cron_next_run_at"] == T0 + timedelta(minutes=250)


def test_not_due_job_is_left_alone(database: Database, endpoint: str) -> None:
    job_id = seed_cron_job(database, next_run_at=T0)
    progress = CronMaterializer(database, clock=FakeClock(T0 - timedelta(seconds=1))).run_once()
    assert (progress.count, progress.more) == (0, False)
    assert executions_of(database, job_id) == []


def test_cas_loser_does_nothing(database: Database, endpoint: str) -> None:
    job_id = seed_cron_job(database, next_run_at=T0)
    winner = CronMaterializer(database, clock=FakeClock(T0))
    due = DueJob.from_row(job(database, job_id))  # read before the winner moves on
    winner.run_once()
    loser = CronMaterializer(database, clock=FakeClock(T0))
    stale = TickPlan(TickAction.MATERIALIZE, T0, T0 + timedelta(minutes=1))
    assert loser.apply([(due, stale)]) == {}
    assert loser.materialize([due], T0) == (0, False)
    assert run_times(database, job_id) == [T0]
    assert job(database, job_id)["cron_next_run_at"] == T0 + timedelta(minutes=1)


def test_ticks_at_or_after_ends_at_are_not_materialized_and_the_job_retires(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(database, next_run_at=T0, ends_at=T0 + timedelta(minutes=5))
    clock = FakeClock(T0 + timedelta(minutes=10))
    materializer = CronMaterializer(database, clock=clock)
    assert materializer.run_once().count == 5
    assert run_times(database, job_id) == minutes(T0, 5)
    row = job(database, job_id)
    assert row["cron_next_run_at"] is None
    assert row["cron_last_tick_at"] == T0 + timedelta(minutes=4)
    assert (row["status"], row["retired_at"]) == ("RETIRED", T0 + timedelta(minutes=5))
    clock.advance(days=1)
    assert materializer.run_once().count == 0


def test_job_whose_next_tick_is_ends_at_is_exhausted_without_an_execution(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(database, next_run_at=T0, ends_at=T0)
    assert CronMaterializer(database, clock=FakeClock(T0)).run_once().count == 0
    assert executions_of(database, job_id) == []
    row = job(database, job_id)
    assert (row["cron_next_run_at"], row["status"], row["retired_at"]) == (None, "RETIRED", T0)


def test_tick_before_starts_at_moves_to_the_first_tick_after_it(
    database: Database, endpoint: str
) -> None:
    job_id = seed_cron_job(
        database, next_run_at=T0, starts_at=T0 + timedelta(minutes=2, seconds=30)
    )
    CronMaterializer(database, clock=FakeClock(T0 + timedelta(minutes=4))).run_once()
    assert run_times(database, job_id) == [T0 + timedelta(minutes=3), T0 + timedelta(minutes=4)]


def test_retired_job_is_not_due(database: Database, endpoint: str) -> None:
    job_id = seed_cron_job(database, next_run_at=T0)
    retire(database, job_id)
    assert CronMaterializer(database, clock=FakeClock(T0)).run_once().count == 0
    assert executions_of(database, job_id) == []


@pytest.mark.parametrize("retire_at_tick", [0, 2])
def test_job_retired_between_scan_and_insert_never_ticks_again(
    database: Database, endpoint: str, retire_at_tick: int
) -> None:
    job_id = seed_cron_job(database, next_run_at=T0)
    retire_tick = T0 + timedelta(minutes=retire_at_tick)
    seen: list[datetime] = []

    def retire_mid_flight(hook_job_id: str, tick: datetime) -> None:
        # Runs after the due scan read the job as ACTIVE, before the tick's statement.
        seen.append(tick)
        if tick == retire_tick:
            retire(database, hook_job_id)

    clock = FakeClock(T0 + timedelta(minutes=5))
    materializer = CronMaterializer(database, clock=clock, before_tick=retire_mid_flight)
    assert materializer.run_once().count == retire_at_tick
    assert retire_tick in seen
    assert run_times(database, job_id) == minutes(T0, retire_at_tick)
    row = job(database, job_id)
    assert (row["status"], row["cron_next_run_at"]) == ("RETIRED", retire_tick)
    clock.advance(hours=1)
    assert materializer.run_once().count == 0
    assert run_times(database, job_id) == minutes(T0, retire_at_tick)


DST_CASES = {
    "new_york_spring_forward_skips_0230": (
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T07:30",
        "2026-03-10T12:00",
        ["2026-03-07T07:30", "2026-03-09T06:30", "2026-03-10T06:30"],
        "2026-03-11T06:30",
    ),
    "new_york_fall_back_fires_0130_once": (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T05:30",
        "2026-11-02T12:00",
        ["2026-10-31T05:30", "2026-11-01T05:30", "2026-11-02T06:30"],
        "2026-11-03T06:30",
    ),
    "new_york_hourly_fall_back_no_second_0100": (
        "America/New_York",
        "0 * * * *",
        "2026-11-01T04:00",
        "2026-11-01T08:30",
        ["2026-11-01T04:00", "2026-11-01T05:00", "2026-11-01T07:00", "2026-11-01T08:00"],
        "2026-11-01T09:00",
    ),
    "new_york_hourly_spring_forward_no_gap_in_utc": (
        "America/New_York",
        "0 * * * *",
        "2026-03-08T05:00",
        "2026-03-08T08:30",
        ["2026-03-08T05:00", "2026-03-08T06:00", "2026-03-08T07:00", "2026-03-08T08:00"],
        "2026-03-08T09:00",
    ),
    "berlin_spring_forward_skips_0230": (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-28T01:30",
        "2026-03-30T12:00",
        ["2026-03-28T01:30", "2026-03-30T00:30"],
        "2026-03-31T00:30",
    ),
    "berlin_fall_back_fires_0230_once": (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24T00:30",
        "2026-10-26T12:00",
        ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"],
        "2026-10-27T01:30",
    ),
    "kolkata_half_hour_offset": (
        "Asia/Kolkata",
        "0 9 * * MON",
        "2026-03-16T03:30",
        "2026-03-31T00:00",
        ["2026-03-16T03:30", "2026-03-23T03:30", "2026-03-30T03:30"],
        "2026-04-06T03:30",
    ),
}


@pytest.mark.parametrize("case", DST_CASES.values(), ids=DST_CASES.keys())
def test_dst_and_offsets(
    database: Database, endpoint: str, case: tuple[str, str, str, str, list[str], str]
) -> None:
    zone, cron, first, now, expected, following = case
    job_id = seed_cron_job(database, cron=cron, timezone=zone, next_run_at=utc(first))
    CronMaterializer(database, clock=FakeClock(utc(now))).run_once()
    assert run_times(database, job_id) == [utc(t) for t in expected]
    assert job(database, job_id)["cron_next_run_at"] == utc(following)


def _expected_ticks(cron: str, first: datetime, now: datetime) -> tuple[list[datetime], datetime]:
    ticks, tick = [], first
    while tick <= now:
        ticks.append(tick)
        tick = next_tick(cron, ZoneInfo("UTC"), tick)
    return ticks, tick


def _drain(db_url: str, clock: FakeClock, start: threading.Barrier, created: list[int]) -> None:
    db = Database.from_url(db_url, pool_size=2)
    try:
        materializer = CronMaterializer(db, clock=clock, batch_size=4, max_ticks_per_job=3)
        start.wait()
        while True:
            progress = materializer.run_once()
            created.append(progress.count)
            if progress.count == 0 and not progress.more and not _any_due(db, clock()):
                return
    finally:
        db.close()


def _any_due(db: Database, now: datetime) -> bool:
    return bool(
        db.run(
            "SELECT 1 FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE' "
            "AND cron_next_run_at <= :now LIMIT 1",
            now=now,
        )
    )


@pytest.mark.parametrize("schedulers", [2, 3])
def test_concurrent_schedulers_materialize_each_tick_exactly_once(
    database: Database, db_url: str, endpoint: str, schedulers: int
) -> None:
    crons = ["* * * * *", "*/2 * * * *", "*/5 * * * *", "3,7,11 * * * *"]
    now = T0 + timedelta(minutes=24, seconds=30)
    jobs = {}
    for i in range(12):
        cron = crons[i % len(crons)]
        first = next_tick(cron, ZoneInfo("UTC"), T0 - timedelta(seconds=1))
        jobs[seed_cron_job(database, cron=cron, next_run_at=first)] = (cron, first)
    clock = FakeClock(now)
    start = threading.Barrier(schedulers)
    created: list[int] = []
    threads = [
        threading.Thread(target=_drain, args=(db_url, clock, start, created))
        for _ in range(schedulers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = 0
    for job_id, (cron, first) in jobs.items():
        ticks, following = _expected_ticks(cron, first, now)
        assert run_times(database, job_id) == ticks, cron
        assert job(database, job_id)["cron_next_run_at"] == following
        total += len(ticks)
    assert sum(created) == total
    keys = database.run("SELECT count(DISTINCT idempotency_key) AS n FROM executions")
    assert keys[0]["n"] == total


@pytest.mark.parametrize(("cron", "timezone"), [("* * * * *", "Not/A_Zone"), ("0 0 30 2 *", "UTC")])
def test_unschedulable_job_is_set_aside_and_does_not_block_the_others(
    database: Database,
    endpoint: str,
    caplog: pytest.LogCaptureFixture,
    cron: str,
    timezone: str,
) -> None:
    # Only the API writes jobs and it validates them; this row bypassed it.
    broken = seed_cron_job(database, cron=cron, timezone=timezone, next_run_at=T0)
    healthy = seed_cron_job(database, next_run_at=T0 + timedelta(seconds=1))
    with caplog.at_level(logging.ERROR):
        progress = CronMaterializer(database, clock=FakeClock(T0 + MINUTE / 2)).run_once()
    assert progress.count == 1
    assert run_times(database, healthy) == [T0 + timedelta(seconds=1)]
    assert executions_of(database, broken) == []
    # Out of the due scan, with the reason (tests/integration/scheduler/test_poison_rows.py).
    row = job(database, broken)
    assert (row["cron_next_run_at"], row["status"]) == (None, "ACTIVE")
    assert row["schedule_error"]
    reports = [r for r in caplog.records if getattr(r, "event", None) == "cron_job_unschedulable"]
    assert [r.job_id for r in reports] == [broken]  # type: ignore[attr-defined]


def test_look_ahead_materializes_a_tick_due_within_it_with_run_at_the_tick(
    database: Database, endpoint: str
) -> None:
    soon = seed_cron_job(database, next_run_at=T0 + timedelta(seconds=1))
    later = seed_cron_job(database, next_run_at=T0 + timedelta(seconds=1, milliseconds=1))
    clock = FakeClock(T0)
    materializer = CronMaterializer(database, lookahead=timedelta(seconds=1), clock=clock)
    assert (materializer.run_once().count, materializer.run_once().count) == (1, 0)
    [execution] = executions_of(database, soon)
    assert (execution["status"], execution["run_at"]) == ("QUEUED", T0 + timedelta(seconds=1))
    assert job(database, soon)["cron_next_run_at"] == T0 + MINUTE  # next "* * * * *" tick
    assert executions_of(database, later) == []
    clock.advance(milliseconds=1)
    assert materializer.run_once().count == 1
    assert run_times(database, later) == [T0 + timedelta(seconds=1, milliseconds=1)]


def test_a_batch_of_jobs_due_at_one_tick_is_one_round(database: Database, endpoint: str) -> None:
    jobs = [seed_cron_job(database, next_run_at=T0) for _ in range(30)]
    rounds: list[int] = []
    materializer = CronMaterializer(database, clock=FakeClock(T0))
    apply = materializer.apply

    def counting(plans: list[tuple[DueJob, TickPlan]]) -> dict[str, bool]:
        rounds.append(len(plans))
        return apply(plans)

    materializer.apply = counting  # type: ignore[method-assign]
    assert materializer.run_once().count == 30
    assert rounds == [30]
    for job_id in jobs:
        assert run_times(database, job_id) == [T0]
        assert len(logs_of(database, executions_of(database, job_id)[0]["execution_id"])) == 1


def test_negative_look_ahead_is_refused(database: Database) -> None:
    with pytest.raises(ValueError, match="lookahead"):
        CronMaterializer(database, lookahead=timedelta(seconds=-1))


@pytest.mark.postgres_only
def test_notify_is_published_when_ticks_are_materialized(
    database: Database, db_url: str, endpoint: str
) -> None:
    seed_cron_job(database, next_run_at=T0)
    listener = ConnectionParams.from_url(db_url).connect()
    try:
        listener.run(f"LISTEN {notify.CHANNEL}")
        assert CronMaterializer(database, clock=FakeClock(T0)).run_once().count == 1
        assert CronMaterializer(database, clock=FakeClock(T0)).run_once().count == 0
        listener.run("SELECT 1")  # notifications arrive with the next round trip
        assert [n[1] for n in listener.notifications] == [notify.CHANNEL]
    finally:
        listener.close()


def test_a_stored_zone_now_refused_at_creation_still_materializes(
    database: Database, endpoint: str
) -> None:
    """Jobs created before host-dependent names were refused keep firing on this host."""
    # "Factory" is in the tz database (it loads everywhere) but refused for new jobs.
    job_id = seed_cron_job(database, timezone="Factory", next_run_at=utc("2026-03-16T09:00"))
    clock = FakeClock(utc("2026-03-16T09:00:30"))
    assert CronMaterializer(database, clock=clock).run_once().count == 1
    assert run_times(database, job_id) == [utc("2026-03-16T09:00")]


def test_a_stored_expression_past_the_length_limit_is_set_aside_and_never_cached(
    database: Database, endpoint: str
) -> None:
    """Stored before the API bounded expressions: 1 MiB ones cost 3.1 s a tick each, every
    pass, and the tick cache kept them (RSS 210 -> 393 MB in 15 minutes)."""
    stored = "0," + ",".join(["*/1"] * 5000) + " * * * *"  # 20 KB
    broken = seed_cron_job(database, cron=stored, next_run_at=T0)
    caches = (materializer._next_tick, materializer._first_tick)
    cached = [cache.cache_info().currsize for cache in caches]
    progress = CronMaterializer(database, clock=FakeClock(T0 + MINUTE / 2)).run_once()
    assert progress.count == 0 and executions_of(database, broken) == []
    row = job(database, broken)
    assert (row["cron_next_run_at"], row["status"]) == (None, "ACTIVE")
    assert f"at most {MAX_CRON_LENGTH}" in row["schedule_error"]
    assert [cache.cache_info().currsize for cache in caches] == cached
