"""One validation budget per request, spent before any transaction opens.

The finding: a payload spec of 22 nested ``anyOf`` levels (two ``$ref``s each to the next
level; no cycle, so accepted) costs a single ``POST /jobs`` its 0.5 s budget, but a batch
of 30 such items took 26.6 s, inside an open SERIALIZABLE transaction: the budget was per
item, and validation ran in the transaction. And a non-cyclic chain of 8,000 ``$ref``s made
``POST /payload-specs`` a 500 (``RecursionError``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain import payload_specs
from chalicelib.domain.payload_specs import MAX_IN_PLACE_DEPTH
from chalicelib.services.jobs import create
from tests.support.api_client import ApiClient

LEVELS = 22


def exponential_schema(levels: int = LEVELS) -> dict[str, Any]:
    """Each level is anyOf two refs to the next: an input that fails at the leaf makes the
    validator try 2**levels paths."""
    defs: dict[str, Any] = {
        f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"l{levels}"] = {"type": "object", "required": ["needle"]}
    return {"$defs": defs, "$ref": "#/$defs/l0"}


@pytest.fixture
def hostile(api: ApiClient) -> str:
    reply = api.post("/payload-specs", {"name": "slow", "schema": exponential_schema()})
    assert reply.status == 201, reply.body
    spec = {"url": "http://127.0.0.1:9/", "method": "POST"}
    body = {"name": "slow", "type": "HTTP", "spec": spec, "payload_spec": "slow"}
    assert api.post("/endpoints", body).status == 201
    return "slow"


def _item(key: str, value: Any) -> dict[str, Any]:
    return {"endpoint": "slow", "trigger": "IMMEDIATE", "idempotency_key": key, "input": value}


@pytest.fixture
def open_transactions_seen(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """Each validation the service runs records how many sessions of the database are inside
    a transaction at that moment (read from pg_stat_activity on the test's own connection)."""
    seen: list[int] = []
    real = payload_specs.validate_input

    def watched(schema: Any, value: Any) -> None:
        rows = database.run(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
            "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
        )
        seen.append(int(rows[0]["n"]))
        real(schema, value)

    monkeypatch.setattr(create, "validate_input", watched)
    yield seen


def test_a_batch_shares_one_budget_and_the_rest_is_refused_item_by_item(
    api: ApiClient, database: Database, hostile: str
) -> None:
    items = [_item("ok", {"needle": 1})] + [_item(f"k{i}", {"hay": i}) for i in range(30)]
    reply = api.post("/jobs/batch", {"jobs": items})
    assert reply.status == 200, reply.body
    first, *rest = reply.body["items"]
    assert first["status"] == 201
    assert {(i["status"], i["error"]["code"]) for i in rest} == {(422, "INPUT_VALIDATION_FAILED")}
    messages = [i["error"]["message"] for i in rest]
    # The first costly item spends the request's budget; every later one is refused without
    # being validated, instead of spending a budget of its own.
    assert "within the request's 0.5 s validation budget" in messages[0]
    assert all("validation budget (0.5 s for all its items) was spent" in m for m in messages[1:])
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 1


def test_an_atomic_batch_past_its_budget_is_refused_whole(
    api: ApiClient, database: Database, hostile: str
) -> None:
    items = [_item(f"k{i}", {"x": i}) for i in range(1000)]
    reply = api.post("/jobs/batch", {"jobs": items, "atomic": True})
    assert reply.status == 422 and reply.error_code == "BATCH_REJECTED", reply.body
    assert len(reply.body["error"]["items"]) == 1000
    assert database.run("SELECT count(*) AS n FROM jobs")[0]["n"] == 0


def test_validation_runs_with_no_transaction_open(
    api: ApiClient, hostile: str, open_transactions_seen: list[int]
) -> None:
    batch = {"jobs": [_item("a", {"needle": 1}), _item("b", {"hay": 1})]}
    assert api.post("/jobs/batch", batch).status == 200
    assert api.post("/jobs", _item("c", {"y": 1})).status == 422
    created = api.post(
        "/jobs",
        {"endpoint": "slow", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"},
    )
    assert created.status == 422  # an empty object has no needle
    assert len(open_transactions_seen) >= 4
    assert set(open_transactions_seen) == {0}


def test_put_validates_the_new_input_before_its_transaction(
    api: ApiClient, database: Database, hostile: str, open_transactions_seen: list[int]
) -> None:
    database.execute("UPDATE payload_specs SET schema_json = '{}' WHERE name = 'slow'")
    created = api.post(
        "/jobs",
        {"endpoint": "slow", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"},
    )
    assert created.status == 201, created.body
    database.execute(
        "UPDATE payload_specs SET schema_json = CAST(:s AS JSONB) WHERE name = 'slow'",
        s=json.dumps(exponential_schema()),
    )
    reply = api.put(f"/jobs/{created.body['job_id']}", {"input": {"a": 1}})
    assert reply.status == 422 and reply.error_code == "INPUT_VALIDATION_FAILED", reply.body
    assert open_transactions_seen and set(open_transactions_seen) == {0}


def test_a_chain_of_refs_past_the_limit_is_a_422_not_a_500(api: ApiClient) -> None:
    # 500 links (18 KB): far past the limit, and cheap to check against the meta-schema;
    # 8,000 links (279 KB) took about the whole budget of a schema's check.
    n = 500
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "object"}
    reply = api.post(
        "/payload-specs", {"name": "deep", "schema": {"$defs": defs, "$ref": "#/$defs/d0"}}
    )
    assert reply.status == 422, reply.body
    assert reply.error_code == "INVALID_SCHEMA"
    assert str(MAX_IN_PLACE_DEPTH) in reply.body["error"]["message"]


def test_a_chain_within_the_limit_is_accepted(api: ApiClient) -> None:
    n = MAX_IN_PLACE_DEPTH - 2
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "object"}
    reply = api.post(
        "/payload-specs", {"name": "ok", "schema": {"$defs": defs, "$ref": "#/$defs/d0"}}
    )
    assert reply.status == 201, reply.body
