"""The delayed promoter against real PostgreSQL at SERIALIZABLE, with a fake clock."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.promoter import PROMOTED_MESSAGE, DelayedPromoter
from tests.integration.scheduler.factory import (
    T0,
    FakeClock,
    execution,
    logs_of,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)


@pytest.fixture
def job_id(database: Database) -> str:
    seed_endpoint(database)
    return seed_one_shot_job(database)


def statuses(db: Database) -> dict[str, int]:
    rows = db.run("SELECT status, count(*) AS n FROM executions GROUP BY status")
    return {r["status"]: r["n"] for r in rows}


def test_due_pending_executions_are_queued_and_logged(database: Database, job_id: str) -> None:
    due = seed_execution(database, job_id=job_id, status="PENDING", run_at=T0)
    later = seed_execution(
        database, job_id=job_id, status="PENDING", run_at=T0 + timedelta(milliseconds=1)
    )
    progress = DelayedPromoter(database, clock=FakeClock(T0)).run_once()
    assert (progress.count, progress.more) == (1, False)
    assert execution(database, due)["status"] == "QUEUED"
    assert execution(database, later)["status"] == "PENDING"
    [log] = logs_of(database, due)
    assert (log["level"], log["attempt_number"], log["message"]) == ("INFO", 0, PROMOTED_MESSAGE)
    assert logs_of(database, later) == []


def test_only_pending_rows_move(database: Database, job_id: str) -> None:
    others = {
        status: seed_execution(database, job_id=job_id, status=status, run_at=T0)
        for status in ("QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED")
    }
    assert DelayedPromoter(database, clock=FakeClock(T0)).run_once().count == 0
    for status, execution_id in others.items():
        assert execution(database, execution_id)["status"] == status
        assert logs_of(database, execution_id) == []


def test_batches_are_bounded_and_a_full_batch_asks_for_more(
    database: Database, job_id: str
) -> None:
    for i in range(7):
        seed_execution(database, job_id=job_id, status="PENDING", run_at=T0 - timedelta(hours=i))
    promoter = DelayedPromoter(database, batch_size=3, clock=FakeClock(T0))
    assert [(p.count, p.more) for p in (promoter.run_once() for _ in range(4))] == [
        (3, True),
        (3, True),
        (1, False),
        (0, False),
    ]
    assert statuses(database) == {"QUEUED": 7}


def test_concurrent_promoters_promote_each_execution_once(
    database: Database, db_url: str, job_id: str
) -> None:
    ids = [
        seed_execution(database, job_id=job_id, status="PENDING", run_at=T0 - timedelta(seconds=i))
        for i in range(120)
    ]
    clock = FakeClock(T0)
    start = threading.Barrier(3)
    counts: list[int] = []

    def promote() -> None:
        db = Database.from_url(db_url, pool_size=1)
        try:
            promoter = DelayedPromoter(db, batch_size=10, clock=clock)
            start.wait()
            while (progress := promoter.run_once()).count or progress.more:
                counts.append(progress.count)
        finally:
            db.close()

    threads = [threading.Thread(target=promote) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 120
    assert statuses(database) == {"QUEUED": 120}
    per_execution = database.run(
        "SELECT execution_id, count(*) AS n FROM execution_logs GROUP BY execution_id"
    )
    assert {r["execution_id"]: r["n"] for r in per_execution} == dict.fromkeys(ids, 1)
