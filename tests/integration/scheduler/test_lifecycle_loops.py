"""Lifecycle work of the scheduler on real PostgreSQL at SERIALIZABLE: cron jobs
retire themselves at ends_at, the housekeeper prunes heartbeats and purges history."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.runtime.loop import LoopSpec, Progress, run_loop
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.scheduler.materializer import CronMaterializer
from tests.support.clock import FakeClock
from tests.support.seed import jobs as f
from tests.support.seed.scheduler import (
    T0,
    executions_of,
    job,
    seed_cron_job,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

MINUTE = timedelta(minutes=1)
NOW = T0 + timedelta(days=100)


@pytest.fixture
def endpoint(database: Database) -> str:
    return seed_endpoint(database)


# -- 4. cron jobs past ends_at retire themselves -------------------------------------------


def test_a_cron_job_waits_for_ends_at_then_retires_with_one_log_line(
    database: Database, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    ends = T0 + timedelta(minutes=2, seconds=30)
    job_id = seed_cron_job(database, next_run_at=T0, ends_at=ends)
    clock = FakeClock(T0 + 2 * MINUTE)
    materializer = CronMaterializer(database, clock=clock, lookahead=timedelta(seconds=1))
    assert materializer.run_once().count == 3
    row = job(database, job_id)
    # Between the last tick and ends_at: still ACTIVE, its next run is the retirement tick.
    assert (row["status"], row["cron_next_run_at"], row["retired_at"]) == ("ACTIVE", ends, None)
    clock.set(ends - timedelta(milliseconds=500))  # inside the look-ahead, not yet past
    materializer.run_once()
    assert job(database, job_id)["status"] == "ACTIVE"
    clock.set(ends + timedelta(seconds=5))
    with caplog.at_level(logging.INFO, logger="chalicelib.scheduler.materializer"):
        assert materializer.run_once().count == 0
    row = job(database, job_id)
    assert (row["status"], row["retired_at"], row["cron_next_run_at"]) == ("RETIRED", ends, None)
    assert len(executions_of(database, job_id)) == 3
    ended = [r for r in caplog.records if getattr(r, "event", None) == "cron_job_ended"]
    assert len(ended) == 1 and ended[0].job_id == job_id  # type: ignore[attr-defined]


def test_several_schedulers_retire_an_ended_job_once(
    database: Database, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    ends = T0 + timedelta(seconds=30)
    jobs = [seed_cron_job(database, next_run_at=ends, ends_at=ends) for _ in range(20)]
    clock = FakeClock(ends + MINUTE)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(10)
            CronMaterializer(database, clock=clock).run_once()
        except BaseException as exc:
            errors.append(exc)

    with caplog.at_level(logging.INFO, logger="chalicelib.scheduler.materializer"):
        threads = [threading.Thread(target=run) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        CronMaterializer(database, clock=clock).run_once()  # whatever was skipped-locked
    assert not errors
    assert {job(database, j)["status"] for j in jobs} == {"RETIRED"}
    ended = [r.job_id for r in caplog.records if getattr(r, "event", None) == "cron_job_ended"]  # type: ignore[attr-defined]
    assert sorted(ended) == sorted(jobs)


def test_a_schedule_that_ends_before_its_first_tick_retires_at_ends_at(
    api: Any, database: Database
) -> None:
    f.welcome_endpoint(database)
    ends = "2020-01-06T09:30:00Z"
    body = {"endpoint": "send-welcome-email", "trigger": "CRON", "cron": "0 9 * * MON"}
    reply = api.post(
        "/jobs",
        {
            **body,
            "timezone": "UTC",
            "input": {"user_id": "u"},
            "starts_at": "2020-01-01T00:00:00Z",
            "ends_at": ends,
        },
    )
    assert reply.status == 201, reply.body
    row = job(database, reply.body["job_id"])
    assert row["cron_next_run_at"] == row["cron_ends_at"]  # not a tick years after the end
    assert reply.body["next_run_at"] is None
    CronMaterializer(database).run_once()
    shown = api.get(f"/jobs/{reply.body['job_id']}").body
    assert (shown["status"], shown["retired_at"]) == ("RETIRED", ends)


# -- 6. heartbeat rows are bounded -------------------------------------------------------


def beat(database: Database, component: str, at: datetime, status: str = "ALIVE") -> None:
    database.execute(
        "INSERT INTO region_heartbeats (region, component, last_beat_at, status) "
        "VALUES ('default', :c, :at, :s)",
        c=component,
        at=at,
        s=status,
    )


def test_heartbeats_of_processes_dead_for_a_day_are_removed(database: Database) -> None:
    beat(database, "worker@a:1", NOW - timedelta(days=2))
    beat(database, "worker@a:2", NOW - timedelta(days=1, seconds=1), "DEAD")
    beat(database, "worker@a:3", NOW - timedelta(hours=23), "DEAD")
    beat(database, "scheduler@b:4", NOW - timedelta(seconds=3))
    progress = Housekeeper(database, retention_days=0, clock=lambda: NOW).run_once()
    assert (progress.count, progress.detail["heartbeats"]) == (2, 2)
    left = database.run("SELECT component FROM region_heartbeats ORDER BY component")
    assert [r["component"] for r in left] == ["scheduler@b:4", "worker@a:3"]


# -- 7. history is bounded by retention ----------------------------------------------------


def old_one_shot(database: Database, key: str, status: str, *, age_days: float) -> str:
    """A one-shot job and its execution created ``age_days`` before NOW, with one attempt
    and two log lines, finished (if terminal) at creation plus a minute."""
    created = NOW - timedelta(days=age_days)
    job_id = seed_one_shot_job(database, key=key)
    execution_id = seed_execution(database, job_id=job_id, status=status, run_at=created)
    terminal = status in ("SUCCESS", "FAILED", "CANCELLED")
    database.execute("UPDATE jobs SET created_at = :t WHERE job_id = :j", t=created, j=job_id)
    f.set_execution(
        database,
        execution_id,
        created_at=created,
        completed_at=created + MINUTE if terminal else None,
    )
    f.add_attempt(database, execution_id, 1, "SUCCESS" if status == "SUCCESS" else "FAILED")
    f.add_log(database, execution_id, "created", created)
    f.add_log(database, execution_id, "done", created + MINUTE)
    return job_id


def old_tick(database: Database, job_id: str, status: str, *, age_days: float) -> str:
    created = NOW - timedelta(days=age_days)
    execution_id = seed_execution(database, job_id=job_id, status=status, run_at=created)
    terminal = status in ("SUCCESS", "FAILED", "CANCELLED")
    f.set_execution(
        database,
        execution_id,
        created_at=created,
        completed_at=created + MINUTE if terminal else None,
    )
    f.add_attempt(database, execution_id, 1, "FAILED")
    f.add_log(database, execution_id, "tick", created)
    return execution_id


def counts(database: Database) -> dict[str, int]:
    tables = ("jobs", "executions", "attempts", "execution_logs")
    return {t: database.run(f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in tables}


def history(database: Database) -> dict[str, Any]:
    """Old finished work (to purge) next to recent and still-live work (to keep)."""
    doomed = [
        old_one_shot(database, f"old-{s}", s, age_days=40)
        for s in ("SUCCESS", "FAILED", "CANCELLED")
    ]
    kept = [
        old_one_shot(database, "recent", "SUCCESS", age_days=10),
        old_one_shot(database, "live", "PENDING", age_days=40),  # a DELAYED run far ahead
    ]
    orphan = seed_one_shot_job(database, key="orphan")
    database.execute(  # after the doomed ones: a first page of two holds two executions
        "UPDATE jobs SET created_at = :t WHERE job_id = :j", t=NOW - timedelta(days=39), j=orphan
    )
    cron_job = seed_cron_job(database, next_run_at=NOW)
    old_ticks = [old_tick(database, cron_job, "SUCCESS", age_days=35 + i) for i in range(3)]
    new_tick = old_tick(database, cron_job, "SUCCESS", age_days=1)
    stuck = old_tick(database, cron_job, "QUEUED", age_days=50)
    return {
        "doomed": [*doomed, orphan],
        "kept": kept,
        "cron": cron_job,
        "old_ticks": old_ticks,
        "kept_ticks": [new_tick, stuck],
    }


def test_retention_purges_old_terminal_history_in_small_batches(
    database: Database, endpoint: str
) -> None:
    seeded = history(database)
    before = counts(database)
    housekeeper = Housekeeper(database, retention_days=30, batch_size=2, clock=lambda: NOW)
    first = housekeeper.run_once()
    assert first.more and first.detail["executions"] == 4  # two of each kind, a full batch
    while housekeeper.run_once().more:
        pass
    after = counts(database)
    # 3 one-shot executions and 3 cron ticks, each with 1 attempt; logs 2 + 1 each; 4 jobs.
    assert before["executions"] - after["executions"] == 6
    assert before["attempts"] - after["attempts"] == 6
    assert before["execution_logs"] - after["execution_logs"] == 9
    assert before["jobs"] - after["jobs"] == 4
    remaining = {r["job_id"] for r in database.run("SELECT job_id FROM jobs")}
    assert remaining == {*seeded["kept"], seeded["cron"]}
    ticks = {e["execution_id"] for e in executions_of(database, seeded["cron"])}
    assert ticks == set(seeded["kept_ticks"])
    assert housekeeper.run_once().count == 0  # idempotent: nothing left to do


def test_retention_zero_keeps_everything(database: Database, endpoint: str) -> None:
    history(database)
    before = counts(database)
    assert Housekeeper(database, retention_days=0, clock=lambda: NOW).run_once().count == 0
    assert counts(database) == before


def test_several_housekeepers_purge_each_row_once(database: Database, endpoint: str) -> None:
    for i in range(30):
        old_one_shot(database, f"bulk-{i}", "SUCCESS", age_days=31 + i)
    barrier = threading.Barrier(3)
    purged: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(10)
            keeper = Housekeeper(database, retention_days=30, batch_size=4, clock=lambda: NOW)
            while True:
                progress = keeper.run_once()
                purged.append(int(progress.detail["executions"]))
                if not progress.more:
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(purged) == 30
    assert counts(database) == {"jobs": 0, "executions": 0, "attempts": 0, "execution_logs": 0}


def test_the_purge_is_reported_in_the_metric_line(
    database: Database, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    old_one_shot(database, "k", "SUCCESS", age_days=45)
    keeper = Housekeeper(database, retention_days=30, clock=lambda: NOW)
    stop = threading.Event()

    def once() -> Progress:
        stop.set()  # one iteration, then the loop ends
        return keeper.run_once()

    spec = LoopSpec(
        name="housekeeper", interval_sec=60, iteration=once, metric_event="history_purged"
    )
    with caplog.at_level(logging.INFO, logger="chalicelib.runtime.loop"):
        run_loop(spec, stop)
    lines = [r for r in caplog.records if getattr(r, "event", None) == "history_purged"]
    assert len(lines) == 1
    fields = {k: getattr(lines[0], k) for k in ("count", "executions", "attempts", "logs", "jobs")}
    assert fields == {"count": 5, "executions": 1, "attempts": 1, "logs": 2, "jobs": 1}
