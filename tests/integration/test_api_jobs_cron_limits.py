"""A cron job's schedule costs a bounded time to compute, never inside a transaction, and
is refused with 422 INVALID_CRON when it cannot run; nothing is written then.

The findings: fourteen jobs with 1 MiB expressions (``0,*/1,*/1,...``) made every cron tick
of the deployment fire 64-73 s late; each creation held a SERIALIZABLE transaction open for
3.1 s while the first tick was computed inside it. And a job whose first tick falls at or
after 9999-01-01 (``0 0 1 1 *`` in America/Adak from 9998-06-01; ``0 0 29 2 *``) was a 500,
for POST /jobs and PUT /jobs/{id}.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain import cron
from chalicelib.domain.cron import MAX_CRON_LENGTH
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f

EP = "send-welcome-email"
#: ``0,*/1,*/1,...``: valid, and each list item costs croniter work at every tick.
LONG_CRON = "0," + ",".join(["*/1"] * 75_000) + " * * * *"  # 300 KB


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def cron_job(expression: str = "0 9 * * *", **extra: Any) -> dict[str, Any]:
    body = {
        "endpoint": EP,
        "trigger": "CRON",
        "cron": expression,
        "timezone": "UTC",
        "input": {"user_id": "u_abc"},
    }
    body.update(extra)
    return body


def _count(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


def _refused(reply: Any, fragment: str) -> None:
    assert reply.status == 422 and reply.error_code == "INVALID_CRON", reply.body
    assert fragment in reply.body["error"]["message"]
    assert len(reply.body["error"]["message"]) < 400  # the expression is not echoed whole


# -- length ---------------------------------------------------------------------------------


def test_a_long_expression_is_refused_and_nothing_is_written(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    _refused(api.post("/jobs", cron_job(LONG_CRON)), f"at most {MAX_CRON_LENGTH}")
    just_over = "10" + ",0" * 124 + " * * * *"
    assert len(just_over) == MAX_CRON_LENGTH + 2
    _refused(api.post("/jobs", cron_job(just_over)), f"at most {MAX_CRON_LENGTH}")
    batch = api.post("/jobs/batch", {"jobs": [cron_job(LONG_CRON)], "atomic": True})
    assert batch.status == 422 and batch.error_code == "BATCH_REJECTED", batch.body
    assert _count(database, "jobs") == 0
    at_limit = "10" + ",0" * 123 + " * * * *"
    assert len(at_limit) == MAX_CRON_LENGTH
    assert api.post("/jobs", cron_job(at_limit)).status == 201


def test_put_with_a_long_expression_is_refused_and_the_job_stays(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    created = api.post("/jobs", cron_job())
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    _refused(api.put(f"/jobs/{job_id}", {"cron": LONG_CRON}), f"at most {MAX_CRON_LENGTH}")
    assert api.get(f"/jobs/{job_id}").body["status"] == "ACTIVE"
    assert _count(database, "jobs") == 1


# -- no transaction open while a schedule is computed ------------------------------------------


@pytest.fixture
def open_transactions_seen(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """Each tick the API computes records how many sessions of the database are inside a
    transaction at that moment (pg_stat_activity, read on the test's own connection)."""
    seen: list[int] = []
    real = cron.next_tick

    def watched(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
        rows = database.run(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
            "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
        )
        seen.append(int(rows[0]["n"]))
        return real(expression, zone, after)

    monkeypatch.setattr(cron, "next_tick", watched)
    yield seen


def test_schedules_are_computed_with_no_transaction_open(
    api: ApiClient, endpoint: str, open_transactions_seen: list[int]
) -> None:
    created = api.post("/jobs", cron_job())
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    batch = api.post("/jobs/batch", {"jobs": [cron_job("*/5 * * * *")]})
    assert batch.status == 200 and batch.body["items"][0]["status"] == 201, batch.body
    updated = api.put(f"/jobs/{job_id}", {"cron": "0 10 * * *"})
    assert updated.status == 200, updated.body
    new_id = updated.body["job_id"]
    assert api.post(f"/jobs/{new_id}/pause", {}).status == 200
    assert api.post(f"/jobs/{new_id}/resume", {}).status == 200
    assert len(open_transactions_seen) >= 4
    assert set(open_transactions_seen) == {0}


# -- a first tick past the supported range -----------------------------------------------------

BEYOND = [
    ("0 0 1 1 *", "America/Adak"),  # 9999-01-01T00:00 there is 10:00 UTC: past the range
    ("0 0 29 2 *", "UTC"),  # the next 29 February is in year 10000
]


@pytest.mark.parametrize(("expression", "zone"), BEYOND)
def test_post_with_no_tick_before_the_end_of_time_is_a_422(
    api: ApiClient, database: Database, endpoint: str, expression: str, zone: str
) -> None:
    body = cron_job(expression, timezone=zone, starts_at="9998-06-01T00:00:00Z")
    _refused(api.post("/jobs", body), "never fires between 9998-06-01T00:00:00Z and 9999-01-01")
    assert _count(database, "jobs") == 0
    # With an end inside the range the job is valid: it retires at its end, unfired.
    ending = api.post("/jobs", {**body, "ends_at": "9998-12-31T00:00:00Z"})
    assert ending.status == 201, ending.body


@pytest.mark.parametrize(("expression", "zone"), BEYOND)
def test_put_with_no_tick_before_the_end_of_time_is_a_422(
    api: ApiClient, database: Database, endpoint: str, expression: str, zone: str
) -> None:
    created = api.post("/jobs", cron_job())
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    change = {"cron": expression, "timezone": zone, "starts_at": "9998-06-01T00:00:00Z"}
    _refused(api.put(f"/jobs/{job_id}", change), "never fires between")
    job = api.get(f"/jobs/{job_id}").body
    assert (job["status"], job["version"], job["cron"]) == ("ACTIVE", 1, "0 9 * * *")
    assert _count(database, "jobs") == 1
