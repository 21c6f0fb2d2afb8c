"""A job's lifecycle end to end: a one-shot job delivered by the real worker is RETIRED when its
execution ends, consistently in the job and execution responses, and stops pinning its
endpoint."""

from __future__ import annotations

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


@pytest.mark.parametrize(("code", "final"), [(200, "SUCCESS"), (500, "FAILED")])
def test_a_delivered_one_shot_job_retires_with_its_execution(
    api: ApiClient,
    database: Database,
    make_worker,
    http_target: HttpTarget,
    code: int,
    final: str,
) -> None:
    http_target.script("/hook", Reply(code, body="x"))
    spec = {"url": http_target.url("/hook"), "method": "POST", "expected_status_codes": [200]}
    assert api.post("/endpoints", {"name": "hook", "type": "HTTP", "spec": spec}).status == 201
    body = {"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "k1", "input": {}}
    job = api.post("/jobs", body).body
    assert job["status"] == "ACTIVE"
    assert api.delete("/endpoints/hook").status == 409  # live: it pins its endpoint

    settle(make_worker(), database, [job["execution"]["execution_id"]])

    shown = api.get(f"/jobs/{job['job_id']}").body
    execution = api.get(f"/executions/{job['execution']['execution_id']}").body
    assert (shown["status"], shown["execution"]["status"], execution["status"]) == (
        "RETIRED",
        final,
        final,
    )
    assert shown["retired_at"] == execution["completed_at"]
    assert api.get("/jobs?status=ACTIVE").body["items"] == []
    assert api.delete("/endpoints/hook").status == 204


def test_a_triggered_cron_run_is_delivered_and_the_job_stays_active(
    api: ApiClient, database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/hook", Reply(200, body="ok"))
    spec = {"url": http_target.url("/hook"), "method": "POST", "expected_status_codes": [200]}
    assert api.post("/endpoints", {"name": "hook", "type": "HTTP", "spec": spec}).status == 201
    body = {"endpoint": "hook", "trigger": "CRON", "cron": "0 9 1 1 *", "timezone": "UTC"}
    created = api.post("/jobs", {**body, "input": {"n": 1}})
    assert created.status == 201, created.body
    job = created.body
    next_run = job["next_run_at"]

    triggered = api.post(f"/jobs/{job['job_id']}/trigger").body
    settle(make_worker(), database, [triggered["execution_id"]])

    execution = api.get(f"/executions/{triggered['execution_id']}").body
    assert (execution["status"], execution["attempt_count"]) == ("SUCCESS", 1)
    assert len(http_target.received("/hook")) == 1
    shown = api.get(f"/jobs/{job['job_id']}").body
    assert (shown["status"], shown["next_run_at"]) == ("ACTIVE", next_run)
