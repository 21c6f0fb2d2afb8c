"""Concurrency keys through the API: ``concurrency_key`` on jobs (POST /jobs, batch items,
topic fan-out, a cron job's ticks and runs), ``flow_control.max_concurrency_per_key`` on
endpoints, each refusal's status and message, and which executions are gated (wait for
room in their key) at creation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.materializer import CronMaterializer
from tests.support.api_client import ApiClient
from tests.support.concurrency import gate, job, post
from tests.support.factories import register_endpoint


def _limited(api: ApiClient, name: str, per_key: int = 2) -> None:
    register_endpoint(api, name, flow_control={"max_concurrency_per_key": per_key})


def _refused(reply: Any, message: str) -> None:
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "INVALID_REQUEST"
    assert message in reply.body["error"]["message"]


# -- the endpoint's limit --------------------------------------------------------------------


def test_an_endpoint_shows_its_per_key_limit_and_a_put_changes_it(api: ApiClient) -> None:
    _limited(api, "tenants", 3)
    shown = api.get("/endpoints/tenants").body
    assert shown["flow_control"] == {"max_concurrency_per_key": 3}
    body = {**{k: shown[k] for k in ("type", "spec")}, "flow_control": {"max_concurrency": 9}}
    replaced = api.put("/endpoints/tenants", body)
    assert replaced.status == 200, replaced.body
    assert api.get("/endpoints/tenants").body["flow_control"] == {"max_concurrency": 9}


@pytest.mark.parametrize("value", [0, 10_001, -1, 2.5, "3", True, None, [3]])
def test_a_per_key_limit_out_of_range_or_not_an_integer_is_a_400_naming_it(
    api: ApiClient, value: Any
) -> None:
    flow = {"max_concurrency_per_key": value, "max_concurrency": 5}
    reply = api.post("/endpoints", {"name": "bad", "type": "HTTP", "spec": _spec(), **_flow(flow)})
    if value is None:  # null is absent
        assert reply.status == 201, reply.body
        assert reply.body["flow_control"] == {"max_concurrency": 5}
        return
    _refused(
        reply,
        "Field 'flow_control.max_concurrency_per_key' must be an integer between 1 and 10000.",
    )
    assert api.get("/endpoints/bad").status == 404  # nothing half-written


def _spec() -> dict[str, Any]:
    return {"url": "http://127.0.0.1:9/", "method": "POST"}


def _flow(flow: dict[str, Any]) -> dict[str, Any]:
    return {"flow_control": flow}


def test_the_limits_bounds_are_accepted(api: ApiClient) -> None:
    for name, value in (("low", 1), ("high", 10_000)):
        _limited(api, name, value)
        assert api.get(f"/endpoints/{name}").body["flow_control"]["max_concurrency_per_key"] == (
            value
        )


# -- the job's key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "length"), [("", 0), ("x" * 201, 201), (7, None), ({"k": 1}, None)]
)
def test_a_bad_concurrency_key_is_a_400_naming_it(
    api: ApiClient, database: Database, value: Any, length: int | None
) -> None:
    _limited(api, "keyed")
    reply = api.post("/jobs", {**job("keyed", "bad", None), "concurrency_key": value})
    _refused(reply, "Field 'concurrency_key' must be a string of 1 to 200 characters.")
    assert database.run("SELECT job_id FROM jobs WHERE endpoint = 'keyed'") == []


def test_a_key_of_200_characters_is_accepted_and_shown(api: ApiClient) -> None:
    _limited(api, "long")
    key = "k" * 200
    reply = api.post("/jobs", job("long", "n", key))
    assert reply.status == 201, reply.body
    assert reply.body["concurrency_key"] == key
    assert api.get(f"/jobs/{reply.body['job_id']}").body["concurrency_key"] == key


def test_a_job_with_both_keys_is_a_400_naming_both(api: ApiClient, database: Database) -> None:
    _limited(api, "both")
    body = {**job("both", "n", "tenant-1"), "ordering_key": "A"}
    _refused(
        api.post("/jobs", body),
        "Fields 'ordering_key' and 'concurrency_key' cannot both be set on one job",
    )
    reply = api.post("/jobs/batch", {"jobs": [job("both", "ok", "t"), body]})
    assert reply.status == 200, reply.body
    assert [item["status"] for item in reply.body["items"]] == [201, 400]
    assert "'ordering_key' and 'concurrency_key'" in reply.body["items"][1]["error"]["message"]
    assert len(database.run("SELECT job_id FROM jobs WHERE endpoint = 'both'")) == 1


def test_a_job_without_a_key_shows_null(api: ApiClient) -> None:
    register_endpoint(api, "plain")
    reply = api.post("/jobs", job("plain", "n", None))
    assert reply.status == 201, reply.body
    assert reply.body["concurrency_key"] is None
    listed = api.get("/jobs?endpoint=plain").body["items"]
    assert [item["concurrency_key"] for item in listed] == [None]


# -- gated or not at creation ----------------------------------------------------------------


def test_the_first_executions_of_a_key_get_its_room_and_the_rest_wait(
    api: ApiClient, database: Database
) -> None:
    _limited(api, "roomy", 2)
    ids = [post(api, "roomy", f"n{i}", "t1") for i in range(4)]
    other = post(api, "roomy", "o", "t2")
    assert gate(database, [*ids, other]) == {
        ids[0]: ("t1", False),
        ids[1]: ("t1", False),
        ids[2]: ("t1", True),
        ids[3]: ("t1", True),
        other: ("t2", False),
    }
    shown = api.get(f"/executions/{ids[2]}").body
    assert shown["status"] == "QUEUED" and shown.get("queue_position") is None


def test_a_key_on_an_endpoint_without_the_limit_is_kept_but_gates_nothing(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "unlimited", flow_control={"max_concurrency": 50})
    register_endpoint(api, "bare")
    ids = [post(api, name, f"{name}-{i}", "t1") for name in ("unlimited", "bare") for i in range(3)]
    assert set(gate(database, ids).values()) == {(None, False)}
    jobs = database.run("SELECT concurrency_key FROM jobs WHERE endpoint IN ('unlimited', 'bare')")
    assert {r["concurrency_key"] for r in jobs} == {"t1"}
    assert database.run("SELECT endpoint FROM concurrency_keys") == []


def test_batch_items_and_a_topic_fan_out_carry_the_key(api: ApiClient, database: Database) -> None:
    _limited(api, "fan-a", 1)
    register_endpoint(api, "fan-b")
    assert api.post("/topics", {"name": "fans", "endpoints": ["fan-a", "fan-b"]}).status == 201
    fanned = api.post(
        "/jobs",
        {"topic": "fans", "trigger": "IMMEDIATE", "idempotency_key": "f1", "concurrency_key": "t"},
    )
    assert fanned.status == 201, fanned.body
    assert [j["concurrency_key"] for j in fanned.body["jobs"]] == ["t", "t"]
    again = api.post("/jobs/batch", {"jobs": [job("fan-a", "b1", "t"), job("fan-b", "b2", "t")]})
    assert again.status == 200, again.body
    ids = [j["execution"]["execution_id"] for j in fanned.body["jobs"]]
    ids += [item["job"]["execution"]["execution_id"] for item in again.body["items"]]
    assert gate(database, ids) == {
        ids[0]: ("t", False),  # fan-a: gated, the key's one room
        ids[1]: (None, False),  # fan-b: no limit
        ids[2]: ("t", True),  # fan-a again: waits for the room
        ids[3]: (None, False),
    }


def test_a_cron_jobs_ticks_and_runs_are_gated_while_its_endpoint_limits(
    api: ApiClient, database: Database
) -> None:
    _limited(api, "ticks", 1)
    created = api.post(
        "/jobs",
        {
            "endpoint": "ticks",
            "trigger": "CRON",
            "cron": "* * * * *",
            "timezone": "UTC",
            "idempotency_key": "c",
            "concurrency_key": "t",
        },
    )
    assert created.status == 201, created.body
    assert created.body["concurrency_key"] == "t"
    job_id = created.body["job_id"]
    first = api.post(f"/jobs/{job_id}/trigger").body["execution_id"]
    second = api.post(f"/jobs/{job_id}/trigger").body["execution_id"]
    assert gate(database, [first, second]) == {first: ("t", False), second: ("t", True)}
    soon = datetime.now(UTC) + timedelta(minutes=2)
    CronMaterializer(database, clock=lambda: soon).run_once()
    ticks = database.run(
        "SELECT concurrency_key, ordering_wait FROM executions WHERE job_id = :j"
        " AND idempotency_key LIKE 'cron%'",
        j=job_id,
    )
    assert ticks and {(r["concurrency_key"], r["ordering_wait"]) for r in ticks} == {("t", True)}
