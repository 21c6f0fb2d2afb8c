"""Ended bulk operations leave after their retention; a RUNNING one never does. The
housekeeper's clock is injected (no sleeps), batches are bounded, and a pass stopped
between batches is taken up by the next housekeeper, as a restarted scheduler's."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.domain.regions import RegionFilter
from chalicelib.scheduler.housekeeper import Housekeeper
from chalicelib.settings import load_settings
from chalicelib.wiring.scheduler import build_loop
from tests.support.clock import T0, FakeClock

NOW = T0 + timedelta(days=100)
DAY = timedelta(days=1)


def operation(db: Database, state: str, *, ended: datetime | None, created: datetime) -> str:
    """An operation as the service leaves it: RUNNING without an end, else ended at ``ended``."""
    row = db.run(
        "INSERT INTO bulk_operations (action, filter, state, created_at, advanced_at, ended_at)"
        " VALUES ('retry', '{}', :state, :created, :created, :ended) RETURNING operation_id",
        state=state,
        created=created,
        ended=ended,
    )
    return str(row[0]["operation_id"])


def ended(db: Database, days_ago: float, state: str = "DONE") -> str:
    at = NOW - timedelta(days=days_ago)
    return operation(db, state, ended=at, created=at - timedelta(minutes=5))


def remaining(db: Database) -> set[str]:
    return {r["operation_id"] for r in db.run("SELECT operation_id FROM bulk_operations")}


def keeper(db: Database, clock: FakeClock, *, batch_size: int = 500, days: int = 7) -> Housekeeper:
    return Housekeeper(
        db, retention_days=0, operation_retention_days=days, batch_size=batch_size, clock=clock
    )


def drain(housekeeper: Housekeeper) -> int:
    removed = 0
    while True:
        progress = housekeeper.run_once()
        removed += int(progress.detail["operations"])
        if not progress.more:
            return removed


def test_ended_operations_past_retention_go_and_running_ones_stay(database: Database) -> None:
    old = {ended(database, 8, state) for state in ("DONE", "ABORTED", "FAILED")}
    recent = ended(database, 6)
    # RUNNING for a year: still pages to work through, never purged
    running = operation(database, "RUNNING", ended=None, created=NOW - timedelta(days=365))
    progress = keeper(database, FakeClock(NOW)).run_once()
    assert (progress.count, progress.detail["operations"], progress.more) == (3, 3, False)
    assert remaining(database) == {recent, running}
    assert old.isdisjoint(remaining(database))


def test_time_moves_and_the_next_pass_takes_what_came_of_age(database: Database) -> None:
    clock = FakeClock(NOW)
    young = ended(database, 6.5)
    running = operation(database, "RUNNING", ended=None, created=NOW - timedelta(days=30))
    housekeeper = keeper(database, clock)
    assert housekeeper.run_once().detail["operations"] == 0
    clock.advance(days=1)  # young has now ended 7.5 days ago
    assert housekeeper.run_once().detail["operations"] == 1
    assert remaining(database) == {running}
    assert young not in remaining(database)


def test_a_backlog_goes_in_bounded_batches_and_a_restart_resumes_it(database: Database) -> None:
    backlog = [ended(database, 10 + i) for i in range(5)]
    running = operation(database, "RUNNING", ended=None, created=NOW - timedelta(days=40))
    clock = FakeClock(NOW)
    first = keeper(database, clock, batch_size=2).run_once()
    # a full batch: the loop would come straight back; the oldest went first
    assert (first.detail["operations"], first.more) == (2, True)
    assert remaining(database) == {*backlog[:3], running}
    # the scheduler stops here; a new one (a new housekeeper) takes the rest up
    assert drain(keeper(database, clock, batch_size=2)) == 3
    assert remaining(database) == {running}


def test_a_row_held_by_another_transaction_is_skipped_then_taken(database: Database) -> None:
    held, free = ended(database, 9), ended(database, 8)
    locked, release, finished = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        def work(tx: Transaction) -> None:
            tx.run("SELECT 1 FROM bulk_operations WHERE operation_id = :id FOR UPDATE", id=held)
            locked.set()
            release.wait(10)

        database.transaction(work, name="test_hold_operation")
        finished.set()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10)
    try:
        housekeeper = keeper(database, FakeClock(NOW))
        assert housekeeper.run_once().detail["operations"] == 1  # the free one; no wait
        assert remaining(database) == {held}
    finally:
        release.set()
        thread.join(10)
    assert finished.is_set()
    assert housekeeper.run_once().detail["operations"] == 1
    assert remaining(database) == set()
    assert free not in remaining(database)


def test_retention_zero_keeps_every_operation(database: Database) -> None:
    kept = {ended(database, 400), ended(database, 30, "ABORTED")}
    assert keeper(database, FakeClock(NOW), days=0).run_once().count == 0
    assert remaining(database) == kept


@pytest.mark.parametrize(("setting", "left"), [("3", 0), ("0", 1)])
def test_the_scheduler_s_housekeeper_reads_the_setting(
    database: Database, setting: str, left: int
) -> None:
    ended(database, 4)
    settings = load_settings(
        {"TE_OPERATION_RETENTION_DAYS": setting, "TE_EXECUTION_RETENTION_DAYS": "0"}
    )
    loop = build_loop("housekeeper", settings, database, FakeClock(NOW), RegionFilter)
    loop.iteration()
    assert len(remaining(database)) == left
