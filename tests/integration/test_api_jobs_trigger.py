"""POST /jobs/{id}/trigger: run a cron job now."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.integration.test_api_jobs_lifecycle import cron_job, one_shot
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f


@pytest.fixture
def endpoint(database: Database) -> str:
    return f.welcome_endpoint(database)


def _schedule(database: Database, job_id: str) -> dict[str, Any]:
    return database.run(
        "SELECT cron_next_run_at, cron_last_tick_at, status FROM jobs WHERE job_id = :id",
        id=job_id,
    )[0]


def test_trigger_creates_one_execution_now_and_leaves_the_schedule(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    job = cron_job(api)  # first tick in 2030
    before = _schedule(database, job["job_id"])

    first = api.post(f"/jobs/{job['job_id']}/trigger")
    second = api.post(f"/jobs/{job['job_id']}/trigger")

    assert (first.status, second.status) == (201, 201), (first.body, second.body)
    ids = {first.body["execution_id"], second.body["execution_id"]}
    assert len(ids) == 2  # each trigger is one more execution
    assert first.body["job_id"] == job["job_id"]
    assert first.body["status"] == "QUEUED"
    assert first.body["input"] == {"user_id": "u_abc"}
    assert _schedule(database, job["job_id"]) == before  # next tick unchanged, no tick spent
    listed = api.get(f"/jobs/{job['job_id']}/executions").body["items"]
    assert {e["execution_id"] for e in listed} == ids
    keys = database.run(
        "SELECT idempotency_key FROM executions WHERE job_id = :id", id=job["job_id"]
    )
    assert all(row["idempotency_key"].startswith("trigger:") for row in keys)
    logs = api.get(f"/executions/{first.body['execution_id']}/logs").body["items"]
    assert [line["message"] for line in logs] == [
        "Execution created (QUEUED) by a trigger: run now, outside the schedule."
    ]


def test_trigger_is_refused_for_one_shot_and_retired_jobs(
    api: ApiClient, database: Database, endpoint: str
) -> None:
    immediate = one_shot(api, key="once")
    retired = cron_job(api)
    assert api.post(f"/jobs/{retired['job_id']}/cancel").status == 200

    for job_id in (immediate["job_id"], retired["job_id"]):
        reply = api.post(f"/jobs/{job_id}/trigger")
        assert (reply.status, reply.error_code) == (409, "JOB_NOT_TRIGGERABLE"), reply.body
        assert job_id in reply.body["error"]["message"]
    assert api.post("/jobs/job_unknown/trigger").status == 404
    created = database.run(
        "SELECT count(*) AS n FROM executions WHERE idempotency_key LIKE 'trigger:%'"
    )
    assert created[0]["n"] == 0  # nothing half-written
