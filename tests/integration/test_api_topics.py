"""Fan-out topics through the API against real PostgreSQL: the /topics routes and their
refusals, POST /jobs with "topic" (every trigger, all or nothing, a key per topic), the 409
on deleting an endpoint a topic names, batches refusing topics, and scopes."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint

SCHEMA = {"type": "object", "required": ["user_id"]}


def error(reply: Any, status: int, code: str) -> str:
    assert reply.status == status, reply.body
    assert reply.body["error"]["code"] == code, reply.body
    return str(reply.body["error"]["message"])


def topic_with(api: ApiClient, name: str, *endpoints: str) -> dict[str, Any]:
    for endpoint in endpoints:
        if api.get(f"/endpoints/{endpoint}").status == 404:
            register_endpoint(api, endpoint)
    reply = api.post("/topics", {"name": name, "endpoints": list(endpoints)})
    assert reply.status == 201, reply.body
    return dict(reply.body)


def fan_out(api: ApiClient, topic: str, key: str | None = "k1", **extra: Any) -> Any:
    body: dict[str, Any] = {"topic": topic, "trigger": "IMMEDIATE", "input": {"user_id": "u"}}
    if key is not None:
        body["idempotency_key"] = key
    return api.post("/jobs", {**body, **extra})


def count(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


# -- /topics -------------------------------------------------------------------------------


def test_topic_lifecycle(api: ApiClient) -> None:
    created = topic_with(api, "orders", "billing", "mailer")
    assert set(created) == {"name", "endpoints", "created_at", "updated_at"}
    assert created["endpoints"] == ["billing", "mailer"]
    assert api.get("/topics/orders").body == created

    register_endpoint(api, "audit")
    replaced = api.put("/topics/orders", {"endpoints": ["audit", "billing"], "name": "orders"})
    assert replaced.status == 200 and replaced.body["endpoints"] == ["audit", "billing"]
    assert replaced.body["created_at"] == created["created_at"]
    assert api.get("/topics").body == {"items": [replaced.body], "cursor": None}

    deleted = api.delete("/topics/orders")
    assert deleted.status == 204 and not deleted.body
    message = error(api.get("/topics/orders"), 404, "TOPIC_NOT_FOUND")
    assert message == "Topic 'orders' does not exist."
    error(api.delete("/topics/orders"), 404, "TOPIC_NOT_FOUND")


def test_topics_page_newest_first_by_cursor(api: ApiClient) -> None:
    for name in ("t-1", "t-2", "t-3"):
        topic_with(api, name, "hook")
    first = api.get("/topics?limit=2").body
    assert [t["name"] for t in first["items"]] == ["t-3", "t-2"]
    rest = api.get(f"/topics?limit=2&cursor={first['cursor']}").body
    assert [t["name"] for t in rest["items"]] == ["t-1"] and rest["cursor"] is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "t"}, "Missing required field(s): endpoints."),
        ({"name": "t", "endpoints": []}, "Field 'endpoints' must be a non-empty array"),
        ({"name": "t", "endpoints": "hook"}, "Field 'endpoints' must be a non-empty array"),
        ({"name": "t", "endpoints": ["hook", "hook"]}, "names endpoint 'hook' more than once"),
        ({"name": "t", "endpoints": ["hook", 5]}, "Field 'endpoints' item 1 must be"),
        ({"name": "t", "endpoints": ["Hook!"]}, "Field 'endpoints' item 0 is not an endpoint"),
        (
            {"name": "t", "endpoints": [f"e{i}" for i in range(101)]},
            "Field 'endpoints' holds at most 100 endpoints; got 101.",
        ),
        ({"name": "Bad_Name", "endpoints": ["hook"]}, "Field 'name' must be 1-100 characters"),
        ({"name": "t", "endpoints": ["hook"], "extra": 1}, "Unknown field(s): extra."),
    ],
)
def test_a_bad_topic_is_a_400_naming_the_field_and_writes_nothing(
    api: ApiClient, database: Database, body: dict[str, Any], message: str
) -> None:
    register_endpoint(api, "hook")
    assert message in error(api.post("/topics", body), 400, "INVALID_REQUEST")
    assert count(database, "topics") == 0


def test_a_topic_naming_a_missing_endpoint_is_a_404_and_writes_nothing(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "hook")
    reply = api.post("/topics", {"name": "t", "endpoints": ["hook", "ghost"]})
    assert error(reply, 404, "ENDPOINT_NOT_FOUND") == "Endpoint 'ghost' does not exist."
    assert count(database, "topics") == 0 and count(database, "topic_endpoints") == 0

    topic_with(api, "t", "hook")
    reply = api.put("/topics/t", {"endpoints": ["ghost"]})
    assert error(reply, 404, "ENDPOINT_NOT_FOUND") == "Endpoint 'ghost' does not exist."
    assert api.get("/topics/t").body["endpoints"] == ["hook"]


def test_a_taken_name_is_409_and_put_never_creates(api: ApiClient) -> None:
    topic_with(api, "t", "hook")
    reply = api.post("/topics", {"name": "t", "endpoints": ["hook"]})
    assert error(reply, 409, "CONFLICT") == "Topic 't' already exists."
    missing = api.put("/topics/nope", {"endpoints": ["hook"]})
    assert error(missing, 404, "TOPIC_NOT_FOUND") == "Topic 'nope' does not exist."
    renamed = api.put("/topics/t", {"name": "u", "endpoints": ["hook"]})
    assert "cannot change" in error(renamed, 400, "INVALID_REQUEST")


def test_deleting_an_endpoint_a_topic_names_is_409_until_the_topic_lets_it_go(
    api: ApiClient,
) -> None:
    topic_with(api, "orders", "billing", "mailer")
    reply = api.delete("/endpoints/mailer")
    assert error(reply, 409, "CONFLICT") == (
        "Endpoint 'mailer' is used by topic(s) orders: remove it from those topics or "
        "delete them first."
    )
    assert api.put("/topics/orders", {"endpoints": ["billing"]}).status == 200
    assert api.delete("/endpoints/mailer").status == 204
    api.delete("/topics/orders")
    assert api.delete("/endpoints/billing").status == 204


def test_topics_follow_the_scopes_of_every_route(api: ApiClient) -> None:
    topic_with(api, "t", "hook")
    api.key = api.post("/keys", {"name": "reader", "scope": "read"}).body["api_key"]
    assert api.get("/topics").status == 200 and api.get("/topics/t").status == 200
    for reply in (
        api.post("/topics", {"name": "u", "endpoints": ["hook"]}),
        api.put("/topics/t", {"endpoints": ["hook"]}),
        api.delete("/topics/t"),
        fan_out(api, "t"),
    ):
        error(reply, 403, "INSUFFICIENT_SCOPE")


# -- POST /jobs with a topic ---------------------------------------------------------------


def test_an_immediate_fan_out_creates_one_queued_job_per_endpoint_in_order(
    api: ApiClient, database: Database
) -> None:
    topic_with(api, "orders", "mailer", "billing")
    reply = fan_out(api, "orders", headers={"X-Tenant": "acme"}, timeout_ms=500)
    assert reply.status == 201, reply.body
    assert reply.body["topic"] == "orders"
    jobs = reply.body["jobs"]
    assert [j["endpoint"] for j in jobs] == ["mailer", "billing"]
    for job in jobs:
        assert job["trigger"] == "IMMEDIATE" and job["status"] == "ACTIVE"
        assert job["idempotency_key"] == "topic:orders:k1"
        assert job["execution"]["status"] == "QUEUED"
        assert job["timeout_ms"] == 500
        assert api.get(f"/jobs/{job['job_id']}").body["timeout_ms"] == 500
    rows = database.run("SELECT headers FROM jobs ORDER BY endpoint")
    assert [r["headers"] for r in rows] == [{"X-Tenant": "acme"}] * 2
    assert count(database, "executions") == 2


def test_a_delayed_fan_out_waits_pending_on_every_endpoint(api: ApiClient) -> None:
    topic_with(api, "later", "a", "b")
    reply = fan_out(api, "later", trigger="DELAYED", delay="1h")
    assert reply.status == 201, reply.body
    for job in reply.body["jobs"]:
        assert job["trigger"] == "DELAYED" and job["execution"]["status"] == "PENDING"
    assert len({job["run_at"] for job in reply.body["jobs"]}) == 1


def test_a_cron_fan_out_schedules_every_endpoint(api: ApiClient) -> None:
    topic_with(api, "daily", "a", "b")
    reply = fan_out(api, "daily", key=None, trigger="CRON", cron="0 9 * * *", timezone="UTC")
    assert reply.status == 201, reply.body
    jobs = reply.body["jobs"]
    assert [j["endpoint"] for j in jobs] == ["a", "b"]
    assert all(j["trigger"] == "CRON" and j["next_run_at"] for j in jobs)
    assert jobs[0]["next_run_at"] == jobs[1]["next_run_at"]


def test_the_same_key_again_answers_200_with_the_same_jobs_whatever_the_body(
    api: ApiClient, database: Database
) -> None:
    topic_with(api, "orders", "a", "b")
    first = fan_out(api, "orders")
    ids = [j["job_id"] for j in first.body["jobs"]]
    again = fan_out(api, "orders")
    assert again.status == 200 and [j["job_id"] for j in again.body["jobs"]] == ids
    other_body = fan_out(api, "orders", input={"user_id": "someone else"})
    assert other_body.status == 200 and [j["job_id"] for j in other_body.body["jobs"]] == ids
    register_endpoint(api, "c")
    api.put("/topics/orders", {"endpoints": ["a", "b", "c"]})
    grown = fan_out(api, "orders")
    assert grown.status == 200 and [j["job_id"] for j in grown.body["jobs"]] == ids
    assert count(database, "jobs") == 2 and count(database, "executions") == 2


def test_the_key_deduplicates_per_topic_not_across_topics_or_endpoints(
    api: ApiClient,
) -> None:
    topic_with(api, "one", "a")
    topic_with(api, "two", "a")
    assert fan_out(api, "one").status == 201
    assert fan_out(api, "two").status == 201
    direct = api.post("/jobs", {"endpoint": "a", "trigger": "IMMEDIATE", "idempotency_key": "k1"})
    assert direct.status == 201


def test_a_refusal_on_the_second_endpoint_writes_nothing(
    api: ApiClient, database: Database
) -> None:
    api.post("/payload-specs", {"name": "strict", "schema": SCHEMA})
    register_endpoint(api, "loose")
    register_endpoint(api, "checked", payload_spec="strict")
    topic_with(api, "mixed", "loose", "checked")
    reply = fan_out(api, "mixed", input={"other": 1})
    error(reply, 422, "INPUT_VALIDATION_FAILED")
    assert count(database, "jobs") == 0 and count(database, "executions") == 0
    assert count(database, "execution_logs") == 0
    assert fan_out(api, "mixed").status == 201  # the key was not taken by the refusal


def test_a_put_topic_leaves_its_jobs_and_the_next_request_follows_the_new_list(
    api: ApiClient,
) -> None:
    topic_with(api, "t", "a", "b")
    first = fan_out(api, "t", key="first").body["jobs"]
    api.put("/topics/t", {"endpoints": ["b"]})
    assert all(api.get(f"/jobs/{j['job_id']}").status == 200 for j in first)
    second = fan_out(api, "t", key="second").body["jobs"]
    assert [j["endpoint"] for j in second] == ["b"]


@pytest.mark.parametrize(
    ("extra", "status", "code", "message"),
    [
        ({"endpoint": "a"}, 400, "INVALID_REQUEST", "'endpoint' and 'topic' exclude each other"),
        ({"url": "https://x.test/"}, 400, "INVALID_REQUEST", "'url' cannot be given with"),
        ({"topic": "nope"}, 404, "TOPIC_NOT_FOUND", "Topic 'nope' does not exist."),
        ({"topic": "Bad!"}, 400, "INVALID_REQUEST", "Field 'topic' must be 1-100 characters"),
        ({"topic": 5}, 400, "INVALID_REQUEST", "Field 'topic' must be a string."),
        ({"idempotency_key": "topic:t:x"}, 400, "INVALID_REQUEST", "must not start with"),
        ({"idempotency_key": "k" * 250}, 400, "INVALID_REQUEST", "is longer than 247"),
        ({"idempotency_key": None}, 400, "INVALID_REQUEST", "Missing required field: idem"),
        ({"trigger": "SOON"}, 400, "INVALID_REQUEST", "Field 'trigger' must be one of"),
        ({"run_at": "2026-01-01T00:00:00Z"}, 400, "INVALID_REQUEST", "Unknown field(s)"),
    ],
)
def test_a_bad_fan_out_is_refused_with_nothing_written(
    api: ApiClient,
    database: Database,
    extra: dict[str, Any],
    status: int,
    code: str,
    message: str,
) -> None:
    topic_with(api, "t", "a")
    body = {"topic": "t", "trigger": "IMMEDIATE", "idempotency_key": "k", **extra}
    assert message in error(api.post("/jobs", body), status, code)
    assert count(database, "jobs") == 0


def test_a_job_with_neither_endpoint_nor_topic_is_a_400(api: ApiClient) -> None:
    reply = api.post("/jobs", {"trigger": "IMMEDIATE", "idempotency_key": "k"})
    assert error(reply, 400, "INVALID_REQUEST") == "Missing required field: endpoint (or topic)."


def test_a_batch_item_with_a_topic_refuses_the_batch_naming_the_item(
    api: ApiClient, database: Database
) -> None:
    topic_with(api, "t", "a")
    items = [
        {"endpoint": "a", "trigger": "IMMEDIATE", "idempotency_key": "x"},
        {"topic": "t", "trigger": "IMMEDIATE", "idempotency_key": "y"},
    ]
    message = error(api.post("/jobs/batch", {"jobs": items}), 400, "INVALID_REQUEST")
    assert message.startswith("Item 1 of 'jobs': field 'topic' is not accepted in a batch")
    assert count(database, "jobs") == 0
