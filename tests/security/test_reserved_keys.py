"""The idempotency keys the service uses for its own jobs cannot be taken by a client.

The finding: ``POST /jobs`` on endpoint B with ``idempotency_key: "callback:<execution_id>:1"``
(DELAYED to 2099) made the real callback "already exist", so it was never created; the same
with ``batch:<batch_id>`` for a batch's ``on_complete``.
"""

from __future__ import annotations

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.jobs import batch_completion_key, callback_key
from tests.support.api_client import ApiClient

SYSTEM_KEYS = [callback_key("exec_0123456789abcdef0123456789abcdef", 1), batch_completion_key("b1")]


@pytest.fixture
def endpoint(api: ApiClient) -> str:
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    assert api.post("/endpoints", {"name": "b", "type": "HTTP", "spec": spec}).status == 201
    return "b"


def _delayed(key: str) -> dict[str, object]:
    return {
        "endpoint": "b",
        "trigger": "DELAYED",
        "run_at": "2099-01-01T00:00:00Z",
        "idempotency_key": key,
    }


@pytest.mark.parametrize("key", SYSTEM_KEYS)
def test_a_system_key_is_refused_with_a_400_and_nothing_is_written(
    api: ApiClient, database: Database, endpoint: str, key: str
) -> None:
    reply = api.post("/jobs", _delayed(key))
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"
    assert "idempotency_key" in reply.body["error"]["message"]
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 0


@pytest.mark.parametrize("key", SYSTEM_KEYS)
def test_a_system_key_in_a_batch_item_is_refused_for_that_item(
    api: ApiClient, endpoint: str, key: str
) -> None:
    reply = api.post("/jobs/batch", {"jobs": [_delayed("mine"), _delayed(key)]})
    assert reply.status == 200, reply.body
    first, second = reply.body["items"]
    assert first["status"] == 201
    assert (second["status"], second["error"]["code"]) == (400, "INVALID_REQUEST")
    atomic = api.post("/jobs/batch", {"jobs": [_delayed("mine-2"), _delayed(key)], "atomic": True})
    assert atomic.status == 422 and atomic.error_code == "BATCH_REJECTED"


@pytest.mark.parametrize("key", ["my-callback:1", "batch-2026", "callback", "cron_nightly"])
def test_keys_that_merely_resemble_system_keys_are_accepted(
    api: ApiClient, endpoint: str, key: str
) -> None:
    assert api.post("/jobs", _delayed(key)).status == 201
