"""The delayed promoter against real PostgreSQL at SERIALIZABLE, with a fake clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db import notify
from chalicelib.db.connection import ConnectionParams, Database
from chalicelib.db.queries import queries
from chalicelib.errors import DatabaseError
from chalicelib.scheduler.promoter import LIVE_COUNTS_EVERY, PROMOTED_MESSAGE, DelayedPromoter
from chalicelib.worker.strategies import claim_strategy
from tests.support.clock import FakeClock
from tests.support.environment import PROFILE
from tests.support.plans import MODES, analyze
from tests.support.seed.scheduler import (
    T0,
    execution,
    logs_of,
    seed_endpoint,
    seed_execution,
    seed_one_shot_job,
)

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


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


def test_look_ahead_queues_rows_due_within_it_and_logs_them(
    database: Database, job_id: str
) -> None:
    inside = seed_execution(
        database, job_id=job_id, status="PENDING", run_at=T0 + timedelta(milliseconds=500)
    )
    beyond = seed_execution(
        database, job_id=job_id, status="PENDING", run_at=T0 + timedelta(milliseconds=501)
    )
    promoter = DelayedPromoter(database, lookahead=timedelta(milliseconds=500), clock=FakeClock(T0))
    assert promoter.run_once().count == 1
    row = execution(database, inside)
    assert (row["status"], row["run_at"]) == ("QUEUED", T0 + timedelta(milliseconds=500))
    assert [log["message"] for log in logs_of(database, inside)] == [PROMOTED_MESSAGE]
    assert execution(database, beyond)["status"] == "PENDING"
    assert logs_of(database, beyond) == []


def test_negative_look_ahead_is_refused(database: Database) -> None:
    with pytest.raises(ValueError, match="lookahead"):
        DelayedPromoter(database, lookahead=timedelta(seconds=-1))


def _claim(db: Database) -> list[str]:
    """Claim with the run's strategy (conditional_update in the CockroachDB pass)."""
    strategy = claim_strategy(PROFILE.get("TE_CLAIM_STRATEGY", "skip_locked"))
    return [c.execution_id for c in strategy.claim(db, "w-test", 10)]


def test_early_promoted_execution_is_not_claimed_before_its_run_at(
    database: Database, job_id: str
) -> None:
    # Real clock: the claim compares run_at with the server's now().
    now = datetime.now(UTC)
    future = seed_execution(
        database, job_id=job_id, status="PENDING", run_at=now + timedelta(minutes=30)
    )
    due = seed_execution(database, job_id=job_id, status="PENDING", run_at=now)
    promoter = DelayedPromoter(database, lookahead=timedelta(hours=1), clock=lambda: now)
    assert promoter.run_once().count == 2
    assert _claim(database) == [due]
    assert execution(database, future)["status"] == "QUEUED"
    assert _claim(database) == []


@pytest.mark.postgres_only
def test_notify_is_published_when_rows_are_promoted(
    database: Database, db_url: str, job_id: str
) -> None:
    seed_execution(database, job_id=job_id, status="PENDING", run_at=T0)
    listener = ConnectionParams.from_url(db_url).connect()
    try:
        listener.run(f"LISTEN {notify.CHANNEL}")
        assert DelayedPromoter(database, clock=FakeClock(T0)).run_once().count == 1
        assert DelayedPromoter(database, clock=FakeClock(T0)).run_once().count == 0
        listener.run("SELECT 1")  # notifications arrive with the next round trip
        assert [n[1] for n in listener.notifications] == [notify.CHANNEL]
    finally:
        listener.close()


def test_the_live_counts_are_written_on_the_first_pass_then_every_15_seconds(
    database: Database,
) -> None:
    """The waiting work is recounted into live_counts (what /overview and /metrics read) on
    a promoter's first pass and then once LIVE_COUNTS_EVERY has passed, not on every pass."""
    seconds = [1000.0]
    promoter = DelayedPromoter(database, clock=FakeClock(T0), monotonic=lambda: seconds[0])

    def counted() -> int:
        return int(promoter.run_once().detail["live_counted"])

    first, again = counted(), counted()
    seconds[0] += LIVE_COUNTS_EVERY
    assert (first, again, counted()) == (1, 0, 1)


def test_the_live_count_reads_the_waiting_work_not_the_history(
    database: Database, job_id: str
) -> None:
    """scheduler_live_counts_write counts what waits (PENDING, QUEUED, RETRYING) on their
    partial indexes: with both plans it reads those rows and never the ended history
    beside them, nor the table sequentially."""
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, created_at,"
        " completed_at)"
        " SELECT :job, 'ep-test', 'HTTP', CASE WHEN g <= 200 THEN 'PENDING'"
        " WHEN g <= 500 THEN 'QUEUED' WHEN g <= 600 THEN 'RETRYING' ELSE 'SUCCESS' END,"
        " now(), now(), CASE WHEN g > 600 THEN now() END"
        " FROM generate_series(1, 10600) AS g",
        job=job_id,
    )
    database.run("ANALYZE")
    for mode in MODES:
        database.run("DELETE FROM live_counts")
        plan = analyze(database, queries["scheduler_live_counts_write"], {}, mode)
        assert "executions" not in plan.seq_scanned(), plan
        assert plan.read()["executions"] <= 600, plan
        counted = database.run("SELECT status, n FROM live_counts ORDER BY status")
        assert [(r["status"], r["n"]) for r in counted] == [
            ("PENDING", 200),
            ("QUEUED", 300),
            ("RETRYING", 100),
        ]


def test_a_failing_step_does_not_keep_the_others_from_running(
    database: Database, job_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promoting, parking, unparking and counting each run whatever the others do: with
    parking failing, the due row is still promoted and the live work still counted, and the
    pass then fails with parking's error (so the loop reports it and backs off)."""
    due = seed_execution(database, job_id=job_id, status="PENDING", run_at=T0)
    promoter = DelayedPromoter(database, clock=FakeClock(T0))
    page = promoter._page

    def failing_park(name: str, **params: int) -> int:
        if name == "scheduler_park":
            raise DatabaseError("parking refused")
        return page(name, **params)

    monkeypatch.setattr(promoter, "_page", failing_park)
    with pytest.raises(DatabaseError, match="parking refused"):
        promoter.run_once()
    assert execution(database, due)["status"] == "QUEUED"
    counted = database.run("SELECT status, n FROM live_counts")
    assert [(r["status"], r["n"]) for r in counted] == [("QUEUED", 1)]
