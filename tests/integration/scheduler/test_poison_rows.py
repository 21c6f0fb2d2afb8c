"""No row can stop a scheduler loop (issue 25): for each loop a poison row is inserted by
SQL beside healthy work, and the healthy work still flows while the poison row is set
aside where an operator sees it. Real PostgreSQL at SERIALIZABLE, a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.materializer import CronMaterializer
from tests.conftest import ApiClient
from tests.integration.scheduler.factory import (
    T0,
    FakeClock,
    executions_of,
    job,
    seed_cron_job,
    seed_endpoint,
)

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
