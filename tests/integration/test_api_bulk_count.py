"""POST /executions/bulk/count: how many executions a bulk action's filter matches, before
acting, counted up to a limit ("more than" past it), and nothing changed by asking."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.operations import COUNT_LIMIT
from tests.integration.test_api_bulk_operations import add_failed, set_status
from tests.support.api_client import ApiClient
from tests.support.seed.dead_letters import T0, assert_invalid, endpoint_with, fail, iso
from tests.support.seed.worker import statuses


def count(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.post("/executions/bulk/count", body)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_the_count_is_what_the_bulk_action_then_matches(api: ApiClient, database: Database) -> None:
    seeded = endpoint_with(database, 5)
    fail(database, seeded.execution_ids[:3], created_at=T0)
    other = endpoint_with(database, 2)
    fail(database, other.execution_ids, created_at=T0)
    selection = {"filter": {"endpoint": seeded.endpoint, "status": "FAILED"}}
    assert count(api, selection) == {"matched": 3, "more": False, "limit": COUNT_LIMIT}
    # asking changed nothing: no operation, every execution as it was
    assert database.run("SELECT count(*) AS n FROM bulk_operations")[0]["n"] == 0
    assert statuses(database, seeded.execution_ids) == {"FAILED": 3, "QUEUED": 2}
    reply = api.post("/executions/bulk", {"action": "retry", **selection})
    assert reply.status == 202, reply.body
    assert (reply.body["matched"], reply.body["done"], reply.body["refused"]) == (3, 3, 0)


def test_each_filter_field_narrows_the_count(api: ApiClient, database: Database) -> None:
    seeded = endpoint_with(database, 6)
    ids = seeded.execution_ids
    fail(database, ids[:2], created_at=T0, error_type="TIMEOUT")
    fail(database, ids[2:4], created_at=T0 + timedelta(hours=2), error_type="HTTP_ERROR")
    set_status(database, ids[4:], "CANCELLED")
    cases = [
        ({"status": "FAILED"}, 4),
        ({"status": ["FAILED", "CANCELLED"]}, 6),
        ({"status": "FAILED", "error_type": "TIMEOUT"}, 2),
        ({"endpoint": seeded.endpoint, "error_type": "HTTP_ERROR"}, 2),
        ({"created_after": iso(T0 + timedelta(hours=1))}, 4),  # ids[2:4] and the cancelled
        ({"created_before": iso(T0 + timedelta(hours=1)), "status": "FAILED"}, 2),
        ({"endpoint": "nobody"}, 0),
    ]
    for given, expected in cases:
        assert count(api, {"filter": given})["matched"] == expected, given
    assert count(api, {"filter": {}, "all": True})["matched"] == 6


@pytest.mark.parametrize("with_endpoint", [True, False])
def test_past_the_limit_the_count_says_more(
    api: ApiClient, database: Database, with_endpoint: bool
) -> None:
    seeded = endpoint_with(database, 1)
    fail(database, seeded.execution_ids)
    add_failed(database, seeded.execution_ids[0], COUNT_LIMIT)  # one more than the limit
    given: dict[str, Any] = {"status": "FAILED"}
    if with_endpoint:
        given["endpoint"] = seeded.endpoint
    assert count(api, {"filter": given}) == {
        "matched": COUNT_LIMIT,
        "more": True,
        "limit": COUNT_LIMIT,
    }
    set_status(database, seeded.execution_ids, "CANCELLED")  # exactly the limit: not more
    assert count(api, {"filter": given})["more"] is False


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"filter": {}}, 'give filter fields, or "all": true'),
        ({}, 'give filter fields, or "all": true'),
        ({"action": "retry", "filter": {"endpoint": "e"}}, "Unknown field(s) for a bulk count"),
        ({"filter": {"name": "e"}}, "Unknown field(s) for a bulk filter"),
        ({"filter": {"status": []}}, "filter.status must be a status or a non-empty list"),
        ({"filter": {"error_type": "lower"}}, "filter.error_type must be an error type"),
        ({"filter": {"created_after": "yesterday"}}, "filter.created_after"),
        ({"filter": {"endpoint": "e"}, "all": True}, "takes an empty filter"),
        ({"filter": {"endpoint": "e"}, "all": "yes"}, "Field 'all' must be true or false"),
        ({"filter": "FAILED"}, "Field 'filter' must be a JSON object"),
    ],
)
def test_every_bad_count_request_is_a_400_with_the_envelope(
    api: ApiClient, body: dict[str, Any], fragment: str
) -> None:
    assert_invalid(api.post("/executions/bulk/count", body), fragment)


def test_a_body_that_is_not_an_object_is_a_400(api: ApiClient) -> None:
    assert_invalid(api.post("/executions/bulk/count", ["FAILED"]), "must be a JSON object")
