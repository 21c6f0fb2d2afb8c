"""The stuck execution reclaimer against real PostgreSQL at SERIALIZABLE, with a fake clock."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.scheduler.reclaimer import Reclaimed, StuckReclaimer
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import (
    T0,
    attempts_of,
    execution,
    logs_of,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

TIMEOUT = 300
EXPIRED = T0 - timedelta(seconds=TIMEOUT + 1)


@pytest.fixture
def job_id(database: Database) -> str:
    seed_endpoint(database)
    return seed_one_shot_job(database)


def reclaimer(db: Database, batch_size: int = 100) -> StuckReclaimer:
    return StuckReclaimer(db, timeout_sec=TIMEOUT, batch_size=batch_size, clock=FakeClock(T0))


def running(
    db: Database, job_id: str, *, attempt: int, of: int, started: datetime = EXPIRED
) -> str:
    return seed_execution(
        db,
        job_id=job_id,
        status="RUNNING",
        run_at=started,
        started_at=started,
        attempt_count=attempt,
        max_attempts=of,
        worker_id="worker-a",
    )


def test_lost_attempt_with_attempts_left_goes_to_retrying_now(
    database: Database, job_id: str
) -> None:
    execution_id = running(database, job_id, attempt=1, of=3)
    assert reclaimer(database).reclaim() == [
        Reclaimed(execution_id, ExecutionStatus.RETRYING, attempt_recorded=True)
    ]
    row = execution(database, execution_id)
    assert (row["status"], row["run_at"], row["worker_id"]) == ("RETRYING", T0, None)
    assert row["completed_at"] is None
    [attempt] = attempts_of(database, execution_id)
    assert (attempt["attempt_number"], attempt["status"]) == (1, "FAILED")
    assert attempt["error"]["type"] == "WORKER_LOST"
    assert "worker-a" in attempt["error"]["message"]
    assert (attempt["started_at"], attempt["completed_at"]) == (EXPIRED, T0)
    assert attempt["duration_ms"] == (TIMEOUT + 1) * 1000
    [log] = logs_of(database, execution_id)
    assert (log["level"], log["attempt_number"]) == ("WARN", 1)
    assert "RETRYING" in log["message"]


def test_lost_last_attempt_fails_the_execution(
    database: Database, job_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    execution_id = running(database, job_id, attempt=3, of=3)
    with caplog.at_level("INFO"):
        progress = reclaimer(database).run_once()
    failed_events = [r for r in caplog.records if getattr(r, "event", "") == "execution_failed"]
    assert [(r.execution_id, r.count) for r in failed_events] == [(execution_id, 1)]  # type: ignore[attr-defined]
    assert (progress.count, dict(progress.detail)) == (1, {"retrying": 0, "failed": 1})
    row = execution(database, execution_id)
    assert (row["status"], row["completed_at"], row["worker_id"]) == ("FAILED", T0, None)
    assert row["run_at"] == EXPIRED
    [attempt] = attempts_of(database, execution_id)
    assert (attempt["attempt_number"], attempt["error"]["type"]) == (3, "WORKER_LOST")
    [log] = logs_of(database, execution_id)
    assert (log["level"], log["attempt_number"]) == ("WARN", 3)
    assert "FAILED" in log["message"]


def test_attempt_the_worker_recorded_before_dying_is_kept(database: Database, job_id: str) -> None:
    execution_id = running(database, job_id, attempt=2, of=3)
    database.execute(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at, error) "
        "VALUES (:id, 2, 'FAILED', :at, CAST(:error AS JSONB))",
        id=execution_id,
        at=EXPIRED,
        error='{"type": "HTTP_ERROR", "status_code": 503, "message": "unavailable"}',
    )
    assert reclaimer(database).reclaim() == [
        Reclaimed(execution_id, ExecutionStatus.RETRYING, attempt_recorded=False)
    ]
    [attempt] = attempts_of(database, execution_id)
    assert attempt["error"]["type"] == "HTTP_ERROR"
    assert execution(database, execution_id)["status"] == "RETRYING"


def test_live_leases_and_other_statuses_are_left_alone(database: Database, job_id: str) -> None:
    live = running(database, job_id, attempt=1, of=3, started=T0 - timedelta(seconds=TIMEOUT))
    others = [
        seed_execution(database, job_id=job_id, status=s, run_at=EXPIRED, started_at=EXPIRED)
        for s in ("QUEUED", "RETRYING", "SUCCESS", "FAILED", "CANCELLED", "PENDING")
    ]
    assert reclaimer(database).reclaim() == []
    assert execution(database, live)["status"] == "RUNNING"
    for execution_id in [live, *others]:
        assert attempts_of(database, execution_id) == []
        assert logs_of(database, execution_id) == []


def test_reclaim_is_idempotent_and_bounded(database: Database, job_id: str) -> None:
    for _ in range(5):
        running(database, job_id, attempt=1, of=2)
    bounded = reclaimer(database, batch_size=2)
    assert [(p.count, p.more) for p in (bounded.run_once() for _ in range(4))] == [
        (2, True),
        (2, True),
        (1, False),
        (0, False),
    ]


def test_concurrent_reclaimers_reclaim_each_execution_once(
    database: Database, db_url: str, job_id: str
) -> None:
    ids = [running(database, job_id, attempt=1 + i % 2, of=2) for i in range(90)]
    start = threading.Barrier(3)
    results: list[Reclaimed] = []

    def reclaim() -> None:
        db = Database.from_url(db_url, pool_size=1)
        try:
            worker = StuckReclaimer(db, timeout_sec=TIMEOUT, batch_size=7, clock=FakeClock(T0))
            start.wait()
            while batch := worker.reclaim():
                results.extend(batch)
        finally:
            db.close()

    threads = [threading.Thread(target=reclaim) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.execution_id for r in results) == sorted(ids)
    rows = database.run(
        "SELECT e.execution_id, e.status, e.attempt_count, "
        "(SELECT count(*) FROM attempts a WHERE a.execution_id = e.execution_id) AS attempts, "
        "(SELECT count(*) FROM execution_logs l WHERE l.execution_id = e.execution_id) AS logs "
        "FROM executions e"
    )
    for row in rows:
        expected = "FAILED" if row["attempt_count"] == 2 else "RETRYING"
        assert (row["status"], row["attempts"], row["logs"]) == (expected, 1, 1)


def _set_lease(db: Database, execution_id: str, expires: datetime) -> None:
    db.run(
        "UPDATE executions SET lease_expires_at = :expires WHERE execution_id = :id",
        expires=expires,
        id=execution_id,
    )


def test_a_renewed_lease_holds_however_long_ago_the_execution_started(
    database: Database, job_id: str
) -> None:
    """A live worker renews its leases: a delivery longer than the lease is not reclaimed."""
    execution_id = running(database, job_id, attempt=1, of=3)  # started a lease ago and more
    _set_lease(database, execution_id, T0 + timedelta(seconds=1))
    assert reclaimer(database).reclaim() == []
    assert execution(database, execution_id)["status"] == "RUNNING"


def test_an_expired_lease_is_reclaimed_however_recently_the_execution_started(
    database: Database, job_id: str
) -> None:
    """A dead worker stops renewing: its executions go back one lease after the last
    renewal, not one timeout after the start."""
    execution_id = running(database, job_id, attempt=1, of=3, started=T0 - timedelta(seconds=5))
    _set_lease(database, execution_id, T0 - timedelta(milliseconds=1))
    assert reclaimer(database).reclaim() == [
        Reclaimed(execution_id, ExecutionStatus.RETRYING, attempt_recorded=True)
    ]
    row = execution(database, execution_id)
    assert (row["status"], row["lease_expires_at"], row["worker_id"]) == ("RETRYING", None, None)
