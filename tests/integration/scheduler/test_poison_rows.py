"""No row can stop a scheduler loop: for each loop a poison row is inserted by
SQL beside healthy work, and the healthy work still flows while the poison row is set
aside where an operator sees it. Real PostgreSQL at SERIALIZABLE, a fake clock."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.promoter import DelayedPromoter
from chalicelib.scheduler.reclaimer import StuckReclaimer
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import (
    T0,
    attempts_of,
    execution,
    executions_of,
    job,
    logs_of,
    seed_cron_job,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

#: What makes the materializer's per-row code (or its round statement) fail today, each
#: something plain SQL can still store.
CRON_POISONS = {
    # The expression cannot be parsed: the tick cannot be planned.
    "unparseable cron": "UPDATE jobs SET cron_expression = 'not a cron' WHERE job_id = :j",
    # No such zone: the row cannot be read into a schedulable job.
    "unknown zone": "UPDATE jobs SET cron_timezone = 'Mars/Olympus_Mons' WHERE job_id = :j",
    # NULL where a string is expected: an AttributeError, not a ValueError.
    "no expression": "UPDATE jobs SET cron_expression = NULL WHERE job_id = :j",
    # A snapshot whose max_attempts is text: the round's statement itself is refused.
    "max_attempts text": "UPDATE jobs SET endpoint_snapshot = jsonb_set(endpoint_snapshot, "
    "'{retry_policy,max_attempts}', to_jsonb(CAST('lots' AS TEXT))) WHERE job_id = :j",
}


@pytest.mark.parametrize("poison", sorted(CRON_POISONS))
def test_materializer_sets_a_poison_cron_job_aside_and_ticks_the_others(
    database: Database, poison: str
) -> None:
    seed_endpoint(database)
    # Two poison jobs due first fill a batch of two: before, they held it for ever.
    bad = [seed_cron_job(database, next_run_at=T0 - timedelta(minutes=2 - i)) for i in range(2)]
    for job_id in bad:
        database.execute(CRON_POISONS[poison], j=job_id)
    good = seed_cron_job(database, next_run_at=T0)
    materializer = CronMaterializer(database, clock=FakeClock(T0), batch_size=2)
    for _ in range(3):
        materializer.run_once()
    assert [e["run_at"] for e in executions_of(database, good)] == [T0]
    for job_id in bad:
        row = job(database, job_id)
        assert row["cron_next_run_at"] is None  # out of the due scan for good
        assert row["status"] == "ACTIVE"
        assert row["schedule_error"]
        assert executions_of(database, job_id) == []


def test_a_set_aside_job_is_shown_with_its_error_and_failing_health(
    api: ApiClient, database: Database
) -> None:
    seed_endpoint(database)
    bad = seed_cron_job(database, next_run_at=T0)
    database.execute(CRON_POISONS["unknown zone"], j=bad)
    CronMaterializer(database, clock=FakeClock(T0)).run_once()
    shown = api.get(f"/jobs/{bad}")
    assert shown.status == 200
    assert "Mars/Olympus_Mons" in shown.body["schedule_error"]
    assert shown.body["next_run_at"] is None
    status = api.get(f"/jobs/{bad}/status")
    assert status.status == 200
    assert (status.body["health"], status.body["schedule_error"]) == (
        "FAILING",
        shown.body["schedule_error"],
    )
    listed = api.get("/jobs?trigger=CRON")
    assert listed.status == 200
    assert [j["job_id"] for j in listed.body["items"]] == [bad]


def expire(db: Database, execution_id: str, **columns: object) -> None:
    """A RUNNING execution whose worker is gone: its lease ran out before T0."""
    sets = ", ".join(f"{name} = :{name}" for name in columns)
    db.execute(
        "UPDATE executions SET lease_expires_at = :lease"
        + (f", {sets}" if sets else "")
        + " WHERE execution_id = :id",
        id=execution_id,
        lease=T0 - timedelta(minutes=1),
        **columns,
    )


def running(db: Database, **extra: object) -> str:
    execution_id = seed_execution(
        db,
        job_id=seed_one_shot_job(db, key=f"k-{uuid.uuid4().hex[:8]}"),
        status="RUNNING",
        run_at=T0 - timedelta(hours=1),
        attempt_count=1,
        max_attempts=1,
        started_at=T0 - timedelta(hours=1),
        worker_id="w-gone",
    )
    expire(db, execution_id, **extra)
    return execution_id


def test_reclaimer_sets_aside_a_row_it_cannot_write_and_reclaims_the_others(
    database: Database,
) -> None:
    seed_endpoint(database)
    # attempts.started_at is NOT NULL: the lost attempt's record cannot be written.
    poison = running(database, started_at=None)
    healthy = running(database, max_attempts=3)
    reclaimer = StuckReclaimer(database, timeout_sec=300, clock=FakeClock(T0))
    reclaimed = reclaimer.run_once()
    assert reclaimed.count == 1
    assert execution(database, healthy)["status"] == "RETRYING"
    assert execution(database, poison)["status"] == "FAILED"
    [attempt] = attempts_of(database, poison)
    assert attempt["error"]["type"] == "UNPROCESSABLE"
    assert "started_at" in attempt["error"]["message"]
    [line] = logs_of(database, poison)
    assert line["level"] == "ERROR" and "could not reclaim" in line["message"]
    # Out of the scan: the next pass has nothing left to do.
    assert reclaimer.run_once().count == 0


def test_reclaimer_fails_an_execution_whose_callback_endpoint_is_corrupt(
    database: Database,
) -> None:
    seed_endpoint(database)
    seed_endpoint(database, "ep-callback")
    # An endpoint row whose spec is not an object: building the callback job raises.
    database.execute("UPDATE endpoints SET spec = CAST('[1]' AS JSONB) WHERE name = 'ep-callback'")
    poison = running(database, on_failure="ep-callback")
    healthy = running(database)
    StuckReclaimer(database, timeout_sec=300, clock=FakeClock(T0)).run_once()
    # Both end FAILED (no attempts left); the poison's log says why it has no callback.
    assert execution(database, healthy)["status"] == "FAILED"
    assert execution(database, poison)["status"] == "FAILED"
    messages = [line["message"] for line in logs_of(database, poison)]
    assert any("No callback job" in m and "unusable" in m for m in messages), messages


def test_promoter_moves_every_due_row_whatever_its_contents(database: Database) -> None:
    # The promoter has no per-row code: its one statement moves PENDING rows by status and
    # run_at alone, so no content of a row can stop it. Proof: rows the worker cannot use.
    seed_endpoint(database)
    poison_job = seed_one_shot_job(database, key="poison")
    database.execute(
        "UPDATE jobs SET endpoint_snapshot = CAST('\"not an object\"' AS JSONB), "
        "input = CAST('[1, 2]' AS JSONB) WHERE job_id = :j",
        j=poison_job,
    )
    poison = seed_execution(
        database, job_id=poison_job, status="PENDING", run_at=T0 - timedelta(days=400)
    )
    database.execute(
        "UPDATE executions SET input = CAST('\"x\"' AS JSONB), max_attempts = 0, "
        "config_snapshot = CAST('[]' AS JSONB), endpoint_type = 'FTP' WHERE execution_id = :e",
        e=poison,
    )
    healthy = seed_execution(
        database, job_id=seed_one_shot_job(database, key="ok"), status="PENDING", run_at=T0
    )
    assert DelayedPromoter(database, clock=FakeClock(T0)).run_once().count == 2
    assert execution(database, healthy)["status"] == "QUEUED"
    assert execution(database, poison)["status"] == "QUEUED"  # the worker sets it aside


def test_housekeeper_skips_a_one_shot_job_it_cannot_delete_and_purges_the_rest(
    database: Database,
) -> None:
    seed_endpoint(database)
    old = T0 - timedelta(days=40)
    # A one-shot job with a second, live execution: deleting the job would break the
    # foreign key of the live one, and before, failed the whole purge every pass.
    poison_job = seed_one_shot_job(database, key="two-executions")
    seed_execution(database, job_id=poison_job, status="FAILED", run_at=old)
    live = seed_execution(database, job_id=poison_job, status="QUEUED", run_at=T0)
    healthy_job = seed_one_shot_job(database, key="done")
    healthy = seed_execution(database, job_id=healthy_job, status="SUCCESS", run_at=old)
    database.execute(
        "UPDATE executions SET completed_at = :old, created_at = :old "
        "WHERE status IN ('FAILED', 'SUCCESS')",
        old=old,
    )
    database.execute("UPDATE jobs SET created_at = :old", old=old)
    housekeeper = Housekeeper(database, retention_days=30, clock=FakeClock(T0))
    purged = housekeeper.purge()
    assert (purged.executions, purged.jobs) == (1, 1)
    assert database.run("SELECT 1 FROM executions WHERE execution_id = :e", e=healthy) == []
    assert execution(database, live)["status"] == "QUEUED"
    assert job(database, poison_job)["job_id"] == poison_job


def test_housekeeper_purges_a_job_whose_executions_straddle_the_end_of_its_batch(
    database: Database,
) -> None:
    """A one-shot job with two ended executions, the second past the batch's last row: the
    job keeps that one, and itself, until the next pass (deleted with one of its executions
    left, it broke fk_executions_job and failed the batch, every pass)."""
    seed_endpoint(database)
    old = T0 - timedelta(days=40)
    first = seed_one_shot_job(database, key="first")
    seed_execution(database, job_id=first, status="SUCCESS", run_at=old)
    twice = seed_one_shot_job(database, key="twice")
    for _ in range(2):
        seed_execution(database, job_id=twice, status="SUCCESS", run_at=old)
    database.execute("UPDATE executions SET completed_at = :old, created_at = :old", old=old)
    database.execute(
        "UPDATE jobs SET created_at = CAST(:old AS TIMESTAMPTZ)"
        " + CASE WHEN job_id = :first THEN INTERVAL '0 s' ELSE INTERVAL '1 s' END",
        old=old,
        first=first,
    )
    housekeeper = Housekeeper(database, retention_days=30, batch_size=2, clock=FakeClock(T0))
    passes = [housekeeper.purge() for _ in range(2)]
    assert [(p.executions, p.jobs) for p in passes] == [(2, 1), (1, 1)]
    assert database.run("SELECT job_id FROM jobs WHERE job_id IN (:a, :b)", a=first, b=twice) == []
