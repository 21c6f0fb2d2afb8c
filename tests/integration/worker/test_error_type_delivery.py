"""GET /executions?error_type= after real deliveries: the worker's finalize records the
last attempt's error type on the execution row (last_error_type, migration 014), which the
listing filters on instead of probing every dead letter's attempts."""

from __future__ import annotations

from typing import Any

from chalicelib.db.connection import Database
from tests.integration.worker.test_callbacks import register
from tests.support.api_client import ApiClient
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle


def test_a_delivered_dead_letter_is_listed_under_its_last_error_type(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register(api, http_target, "down", retry_policy={"max_attempts": 1})
    http_target.script("/down", Reply(503, body="down"))
    job = {"endpoint": "down", "trigger": "IMMEDIATE", "idempotency_key": "e1", "input": {}}
    execution_id = api.post("/jobs", job).body["execution"]["execution_id"]
    assert settle(make_worker(), database, [execution_id]) == {"FAILED": 1}
    listed = api.get("/executions?status=FAILED&error_type=HTTP_ERROR").body["items"]
    assert [item["execution_id"] for item in listed] == [execution_id]
    assert api.get("/executions?status=FAILED&error_type=TIMEOUT").body["items"] == []
