"""A topic's fan-out delivered by a real worker to a real HTTP server on loopback: each job
is delivered on its own (its own retries, its own dead letter), and the same request again
answers 200 with the same jobs and delivers nothing new."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint, retry_policy
from tests.support.seed.worker import attempts
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

pytestmark = pytest.mark.claim_path


def topic_of(api: ApiClient, target: HttpTarget, name: str, *endpoints: str, **kw: Any) -> None:
    for endpoint in endpoints:
        spec = {"url": target.url(f"/{endpoint}"), "method": "POST"}
        register_endpoint(api, endpoint, spec=spec, **kw)
    assert api.post("/topics", {"name": name, "endpoints": list(endpoints)}).status == 201


def publish(api: ApiClient, topic: str) -> Any:
    body = {"topic": topic, "trigger": "IMMEDIATE", "idempotency_key": "order-1", "input": {}}
    return api.post("/jobs", body)


def execution_ids(reply: Any) -> list[str]:
    return [str(job["execution"]["execution_id"]) for job in reply.body["jobs"]]


def test_a_repeated_fan_out_answers_the_same_jobs_and_delivers_nothing_new(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    topic_of(api, http_target, "orders", "mailer", "billing")
    first = publish(api, "orders")
    assert first.status == 201, first.body
    worker = make_worker()
    assert settle(worker, database, execution_ids(first)) == {"SUCCESS": 2}
    assert sorted(r.path for r in http_target.received()) == ["/billing", "/mailer"]

    again = publish(api, "orders")
    assert again.status == 200
    assert [j["job_id"] for j in again.body["jobs"]] == [j["job_id"] for j in first.body["jobs"]]
    assert [j["execution"]["status"] for j in again.body["jobs"]] == ["SUCCESS", "SUCCESS"]
    worker.run_once()
    worker.drain(10)
    assert len(http_target.received()) == 2
    assert database.run("SELECT count(*) AS n FROM executions")[0]["n"] == 2


def test_each_job_of_a_fan_out_retries_and_dead_letters_on_its_own(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    topic_of(api, http_target, "orders", "flaky", "steady", retry_policy=retry_policy(2))
    http_target.script("/flaky", Reply(503, body="down"))
    reply = publish(api, "orders")
    flaky, steady = execution_ids(reply)
    assert settle(make_worker(), database, [flaky, steady]) == {"FAILED": 1, "SUCCESS": 1}
    assert len(attempts(database, flaky)) == 2 and len(attempts(database, steady)) == 1
    dead = api.get("/executions?status=FAILED").body["items"]
    assert [d["execution_id"] for d in dead] == [flaky]
