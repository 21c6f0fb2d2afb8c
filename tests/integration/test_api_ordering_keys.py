"""Ordering keys through the API: ``ordering_key`` on POST /jobs and batch items (1 to 200
characters, 400 naming the field otherwise), the endpoint's ``ordering`` field, the
blocked keys' list (paginated, every refusal), the skip route (404, 409) and
``te_ordering_keys_blocked`` on /metrics."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.housekeeper import Housekeeper
from tests.integration.test_metrics import scrape
from tests.support.api_client import ApiClient
from tests.support.factories import endpoint_body, immediate_job, register_endpoint


def _job(key: str, ordering_key: Any) -> dict[str, Any]:
    return immediate_job("keyed", key, ordering_key=ordering_key)


@pytest.mark.parametrize("value", ["", "x" * 201, 7, ["a"], {"k": 1}, True], ids=repr)
def test_an_ordering_key_that_is_not_1_to_200_characters_is_a_400_naming_it(
    api: ApiClient, database: Database, value: Any
) -> None:
    register_endpoint(api, "keyed")
    reply = api.post("/jobs", _job("bad", value))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "INVALID_REQUEST"
    assert "'ordering_key'" in reply.body["error"]["message"]
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 0  # nothing written
    item = api.post("/jobs/batch", {"jobs": [_job("b1", "fine"), _job("b2", value)]})
    assert item.status == 200, item.body
    assert item.body["items"][1]["status"] == 400
    assert "'ordering_key'" in item.body["items"][1]["error"]["message"]


def test_a_cron_job_refuses_a_bad_ordering_key_too(api: ApiClient) -> None:
    register_endpoint(api, "keyed")
    body = {"endpoint": "keyed", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    reply = api.post("/jobs", {**body, "ordering_key": ""})
    assert reply.status == 400
    assert "'ordering_key'" in reply.body["error"]["message"]


def test_a_job_shows_its_ordering_key_wherever_it_is_read(api: ApiClient) -> None:
    register_endpoint(api, "keyed")
    created = api.post("/jobs", _job("shown", "tenant-1" + "é" * 190))
    assert created.status == 201, created.body
    key = "tenant-1" + "é" * 190  # 198 characters
    assert created.body["ordering_key"] == key
    job_id = created.body["job_id"]
    assert api.get(f"/jobs/{job_id}").body["ordering_key"] == key
    [listed] = api.get("/jobs?endpoint=keyed").body["items"]
    assert listed["ordering_key"] == key
    plain = api.post("/jobs", immediate_job("keyed", "plain"))
    assert "ordering_key" not in plain.body  # shown only when set


def test_the_endpoints_ordering_field_is_validated_and_shown(api: ApiClient) -> None:
    for bad, word in (
        ({"on_failure": "retry"}, "ordering.on_failure"),
        ({"on_failure": 1}, "ordering.on_failure"),
        ({"when": "skip"}, "ordering"),
        ("block", "ordering"),
    ):
        reply = api.post("/endpoints", endpoint_body("bad", ordering=bad))
        assert reply.status == 400, (bad, reply.body)
        assert f"'{word}" in reply.body["error"]["message"], reply.body
    assert api.get("/endpoints/bad").status == 404
    created = api.post("/endpoints", endpoint_body("blocks", ordering={"on_failure": "block"}))
    assert created.status == 201, created.body
    assert created.body["ordering"] == {"on_failure": "block"}
    assert api.get("/endpoints/blocks").body["ordering"] == {"on_failure": "block"}
    replaced = api.put("/endpoints/blocks", endpoint_body("blocks"))
    assert "ordering" not in replaced.body  # the default, skip: shown only when set


def _block(database: Database, endpoint: str, keys: list[str]) -> None:
    """Blocked keys as a failed head with on_failure block leaves them."""
    job = database.run(
        "INSERT INTO jobs (endpoint, endpoint_type, trigger_type) VALUES (:e, 'HTTP', "
        "'IMMEDIATE') RETURNING job_id",
        e=endpoint,
    )[0]["job_id"]
    for key in keys:
        head = database.run(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, ordering_key,"
            " ordering_at) VALUES (:j, :e, 'HTTP', 'FAILED', :k, now()) RETURNING execution_id",
            j=job,
            e=endpoint,
            k=key,
        )[0]["execution_id"]
        database.run(
            "INSERT INTO ordering_keys (endpoint, ordering_key, blocked_execution_id,"
            " blocked_since) VALUES (:e, :k, :h, now())",
            e=endpoint,
            k=key,
            h=head,
        )


def test_the_blocked_keys_list_is_paginated_by_key(api: ApiClient, database: Database) -> None:
    register_endpoint(api, "blocks", ordering={"on_failure": "block"})
    keys = [f"k{i:02}" for i in range(5)] + ["with / slash", "ünï"]
    _block(database, "blocks", keys)
    seen: list[str] = []
    cursor = None
    while True:
        path = "/endpoints/blocks/ordering-keys?state=blocked&limit=2"
        reply = api.get(path + (f"&cursor={cursor}" if cursor else ""))
        assert reply.status == 200, reply.body
        assert all(set(item) == {"key", "execution_id", "since"} for item in reply.body["items"])
        seen += [item["key"] for item in reply.body["items"]]
        cursor = reply.body["cursor"]
        if cursor is None:
            break
    assert seen == sorted(keys)


@pytest.mark.parametrize(
    ("query", "word"),
    [("state=running", "state"), ("limit=0", "limit"), ("cursor=nonsense", "cursor")],
)
def test_the_blocked_keys_list_refuses_a_bad_query_with_400(
    api: ApiClient, query: str, word: str
) -> None:
    register_endpoint(api, "blocks", ordering={"on_failure": "block"})
    reply = api.get(f"/endpoints/blocks/ordering-keys?{query}")
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "INVALID_REQUEST"
    assert word in reply.body["error"]["message"]


def test_the_blocked_keys_routes_answer_404_for_an_unknown_endpoint(api: ApiClient) -> None:
    for reply in (
        api.get("/endpoints/nowhere/ordering-keys"),
        api.post("/endpoints/nowhere/ordering-keys/k/skip"),
    ):
        assert reply.status == 404, reply.body
        assert reply.body["error"]["code"] == "ENDPOINT_NOT_FOUND"


def test_skipping_a_key_that_is_not_blocked_is_a_409(api: ApiClient, database: Database) -> None:
    register_endpoint(api, "blocks", ordering={"on_failure": "block"})
    reply = api.post("/endpoints/blocks/ordering-keys/unknown/skip")
    assert reply.status == 409, reply.body
    assert reply.body["error"]["code"] == "ORDERING_KEY_NOT_BLOCKED"
    assert "unknown" in reply.body["error"]["message"]


def test_skipping_a_key_whose_name_needs_encoding(api: ApiClient, database: Database) -> None:
    register_endpoint(api, "blocks", ordering={"on_failure": "block"})
    _block(database, "blocks", ["a/b c"])
    reply = api.post("/endpoints/blocks/ordering-keys/a%2Fb%20c/skip")
    assert reply.status == 200, reply.body
    assert reply.body["key"] == "a/b c"
    assert api.get("/endpoints/blocks/ordering-keys").body["items"] == []


def test_metrics_show_the_blocked_keys_of_each_endpoint(api: ApiClient, database: Database) -> None:
    register_endpoint(api, "blocks", ordering={"on_failure": "block"})
    register_endpoint(api, "quiet", ordering={"on_failure": "block"})
    register_endpoint(api, "skips")
    _block(database, "blocks", ["a", "b", "c"])
    found = scrape(api)
    assert found[("te_ordering_keys_blocked", (("endpoint", "blocks"),))] == 3
    assert found[("te_ordering_keys_blocked", (("endpoint", "quiet"),))] == 0
    assert ("te_ordering_keys_blocked", (("endpoint", "skips"),)) not in found
    assert api.post("/endpoints/blocks/ordering-keys/b/skip").status == 200
    assert scrape(api)[("te_ordering_keys_blocked", (("endpoint", "blocks"),))] == 2


def test_an_execution_waiting_behind_its_key_has_no_queue_position(api: ApiClient) -> None:
    register_endpoint(api, "keyed")
    head = api.post("/jobs", _job("head", "k")).body["execution"]["execution_id"]
    behind = api.post("/jobs", _job("behind", "k")).body["execution"]["execution_id"]
    assert api.get(f"/executions/{head}").body["queue_position"] == 1
    shown = api.get(f"/executions/{behind}").body
    assert (shown["status"], shown["queue_position"]) == ("QUEUED", None)


def test_the_housekeeper_prunes_idle_keys_with_nothing_left_and_keeps_the_others(
    api: ApiClient, database: Database
) -> None:
    """A key's row outlives its executions by a day, then goes: not while it has a live
    execution, nor while it is blocked; a key used again gets a new row."""
    register_endpoint(api, "keyed", ordering={"on_failure": "block"})
    live = api.post("/jobs", _job("live", "live")).body["execution"]["execution_id"]
    done = api.post("/jobs", _job("done", "done")).body["execution"]["execution_id"]
    assert api.post(f"/executions/{done}/cancel").status == 200
    _block(database, "keyed", ["blocked"])
    database.execute("UPDATE ordering_keys SET touched_at = now() - INTERVAL '2 days'")
    Housekeeper(database, retention_days=0).run_once()
    kept = database.run("SELECT ordering_key FROM ordering_keys ORDER BY ordering_key")
    assert [r["ordering_key"] for r in kept] == ["blocked", "live"]
    assert live
    again = api.post("/jobs", _job("again", "done")).body["execution"]["execution_id"]
    assert api.get(f"/executions/{again}").body["queue_position"] == 2  # its key's head


def test_an_endpoint_a_waiting_keyed_execution_calls_back_cannot_be_deleted(
    api: ApiClient, database: Database
) -> None:
    """An execution waiting behind its key's head is live work: the callback it names (and
    its batch's on_complete) keeps its endpoint from being deleted, as any live work does."""
    register_endpoint(api, "keyed")
    register_endpoint(api, "notify")
    register_endpoint(api, "done")
    head = api.post("/jobs", _job("head", "k"))
    assert head.status == 201, head.body
    waiting = immediate_job("keyed", "waiting", ordering_key="k", on_success="notify")
    assert api.post("/jobs", waiting).status == 201
    batch = api.post("/jobs/batch", {"jobs": [_job("in-batch", "k")], "on_complete": "done"})
    assert batch.status == 200, batch.body
    rows = database.run("SELECT count(*) AS n FROM executions WHERE ordering_wait")
    assert rows[0]["n"] == 2  # both wait behind the head
    for name in ("notify", "done"):
        reply = api.delete(f"/endpoints/{name}")
        assert reply.status == 409, (name, reply.body)
