"""What the reclaimer records of a lost attempt reaches GET /executions?error_type=: the
row's last_error_type (migration 014) says WORKER_LOST, or UNPROCESSABLE for a row set
aside, as the attempt it records does."""

from __future__ import annotations

from datetime import timedelta

from chalicelib.db.connection import Database
from chalicelib.domain.dead_letters import ExecutionFilter
from chalicelib.domain.pagination import PageRequest
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services.dead_letters import DeadLetterService
from tests.support.clock import FakeClock
from tests.support.seed.scheduler import (
    T0,
    execution,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

TIMEOUT = 300
EXPIRED = T0 - timedelta(seconds=TIMEOUT + 1)


def lost(database: Database, job_id: str, attempt: int, of: int) -> str:
    return seed_execution(
        database,
        job_id=job_id,
        status="RUNNING",
        run_at=EXPIRED,
        started_at=EXPIRED,
        attempt_count=attempt,
        max_attempts=of,
        worker_id="worker-a",
    )


def listed(database: Database, status: str, error_type: str) -> list[str]:
    filters = ExecutionFilter(statuses=(status,), error_type=error_type)
    items = DeadLetterService(database).list(filters, PageRequest(limit=50))
    return [item.execution_id for item in items]


def test_a_lost_attempt_is_listed_under_worker_lost(database: Database) -> None:
    seed_endpoint(database)
    job_id = seed_one_shot_job(database)
    failed, retrying = lost(database, job_id, 3, 3), lost(database, job_id, 1, 3)
    reclaimer = StuckReclaimer(database, timeout_sec=TIMEOUT, clock=FakeClock(T0))
    reclaimer.reclaim()
    assert execution(database, failed)["last_error_type"] == "WORKER_LOST"
    assert listed(database, "FAILED", "WORKER_LOST") == [failed]
    assert listed(database, "RETRYING", "WORKER_LOST") == [retrying]
    assert listed(database, "FAILED", "HTTP_ERROR") == []


def test_a_row_set_aside_is_listed_under_unprocessable(database: Database) -> None:
    seed_endpoint(database)
    job_id = seed_one_shot_job(database)
    execution_id = lost(database, job_id, 1, 3)
    reclaimer = StuckReclaimer(database, timeout_sec=TIMEOUT, clock=FakeClock(T0))
    reclaimer.set_aside(execution_id, "a row the reclaim cannot write", T0)
    assert listed(database, "FAILED", "UNPROCESSABLE") == [execution_id]
