"""Dead letters through the API: the listing GET /executions (the
dead-letter view) and POST /executions/{id}/retry, with every bad input and its envelope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed.dead_letters import (
    T0,
    assert_invalid,
    endpoint_with,
    fail,
    ids,
    iso,
)
from tests.support.seed.worker import statuses

# -- the listing -----------------------------------------------------------------------------


def test_the_failed_view_lists_dead_letters_across_jobs_newest_first_with_their_last_error(
    api: ApiClient, database: Database
) -> None:
    a, b = endpoint_with(database, 3), endpoint_with(database, 2)
    fail(database, a.execution_ids[:1], created_at=T0, error_type="TIMEOUT", message="slow")
    fail(database, a.execution_ids[1:2], created_at=T0 + timedelta(minutes=1))
    fail(database, b.execution_ids[:1], created_at=T0 + timedelta(minutes=2), attempts=3)
    # a.execution_ids[2] and b.execution_ids[1] stay QUEUED: not dead letters

    reply = api.get("/executions?status=FAILED")

    assert ids(reply) == [b.execution_ids[0], a.execution_ids[1], a.execution_ids[0]]
    newest = reply.body["items"][0]
    assert newest["endpoint"] == b.endpoint and newest["job_id"] == b.job_id
    assert (newest["status"], newest["attempt_count"]) == ("FAILED", 3)
    assert (newest["error_type"], newest["error"]) == ("HTTP_ERROR", "HTTP 503 from target")
    assert newest["completed_at"] is not None and newest["created_at"] == iso(
        T0 + timedelta(minutes=2)
    )
    oldest = reply.body["items"][2]
    assert (oldest["error_type"], oldest["error"]) == ("TIMEOUT", "slow")
    assert reply.body["cursor"] is None


def test_filters_endpoint_time_range_and_error_type_combine(
    api: ApiClient, database: Database
) -> None:
    a, b = endpoint_with(database, 4), endpoint_with(database, 1)
    for minute, execution_id in enumerate(a.execution_ids):
        kind = "TIMEOUT" if minute % 2 else "HTTP_ERROR"
        fail(database, [execution_id], created_at=T0 + timedelta(minutes=minute), error_type=kind)
    fail(database, b.execution_ids, created_at=T0 + timedelta(minutes=1), error_type="TIMEOUT")
    since, until = iso(T0 + timedelta(minutes=1)), iso(T0 + timedelta(minutes=3))

    assert ids(api.get(f"/executions?status=FAILED&endpoint={b.endpoint}")) == b.execution_ids
    in_range = ids(api.get(f"/executions?status=FAILED&since={since}&until={until}"))
    assert set(in_range) == {a.execution_ids[1], a.execution_ids[2], b.execution_ids[0]}
    timeouts = ids(api.get(f"/executions?status=FAILED&endpoint={a.endpoint}&error_type=TIMEOUT"))
    assert timeouts == [a.execution_ids[3], a.execution_ids[1]]
    everything = ids(
        api.get(f"/executions?endpoint={a.endpoint}&since={since}&until={until}&error_type=TIMEOUT")
    )
    assert everything == [a.execution_ids[1]]  # until is exclusive: minute 3 is out
    assert ids(api.get("/executions?status=FAILED&error_type=STREAM_ERROR")) == []


def test_without_a_status_every_status_is_listed_and_a_status_narrows_it(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 3)
    fail(database, seeded.execution_ids[:1])
    database.run(
        "UPDATE executions SET status = 'SUCCESS', completed_at = now() WHERE execution_id = :id",
        id=seeded.execution_ids[1],
    )
    listed = api.get(f"/executions?endpoint={seeded.endpoint}").body["items"]
    assert {e["status"] for e in listed} == {"FAILED", "SUCCESS", "QUEUED"}
    queued = api.get(f"/executions?endpoint={seeded.endpoint}&status=QUEUED").body["items"]
    assert [(e["execution_id"], e["error_type"], e["error"]) for e in queued] == [
        (seeded.execution_ids[2], None, None)
    ]


@pytest.mark.parametrize("of_endpoint", [False, True])
def test_pages_walk_every_dead_letter_once_even_when_created_at_ties(
    api: ApiClient, database: Database, of_endpoint: bool
) -> None:
    seeded, other = endpoint_with(database, 7), endpoint_with(database, 2)
    fail(database, seeded.execution_ids[:4], created_at=T0)  # four share one created_at
    fail(database, seeded.execution_ids[4:], created_at=T0 + timedelta(seconds=1))
    fail(database, other.execution_ids, created_at=T0)
    query = (
        f"status=FAILED&limit=3&endpoint={seeded.endpoint}"
        if of_endpoint
        else "status=FAILED&limit=3"
    )
    expected = seeded.execution_ids + ([] if of_endpoint else other.execution_ids)
    seen: list[str] = []
    path = f"/executions?{query}"
    while path:
        page = api.get(path)
        seen += ids(page)
        cursor = page.body["cursor"]
        path = f"/executions?{query}&cursor={cursor}" if cursor else ""
    assert sorted(seen) == sorted(expected) and len(seen) == len(expected)
    assert seen[:3] == sorted(seeded.execution_ids[4:], reverse=True)


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("status=DEAD", "status must be one of"),
        ("since=yesterday", "'since' is not an ISO 8601 timestamp"),
        ("until=2026-03-01T12:00:00", "must include a UTC offset"),
        ("since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z", "since must be earlier"),
        ("since=2026-03-01T00:00:00Z&until=2026-03-01T00:00:00Z", "since must be earlier"),
        ("error_type=http_error", "error_type must be an error type"),
        ("error_type=" + "A" * 65, "error_type must be an error type"),
        ("endpoint=", "endpoint must be a non-empty"),
        ("limit=0", "limit must be an integer"),
        ("limit=201", "limit must be an integer"),
        ("cursor=bm9wZQ", "Invalid cursor"),
    ],
)
def test_every_bad_listing_query_is_a_400_with_the_envelope(
    api: ApiClient, query: str, fragment: str
) -> None:
    assert_invalid(api.get(f"/executions?{query}"), fragment)


# -- retry ---------------------------------------------------------------------------------


def test_retry_requeues_a_failed_execution_with_a_new_budget_and_keeps_its_attempts(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 1, max_attempts=3)
    execution_id = seeded.execution_id
    fail(database, [execution_id], attempts=3)
    job_before = api.get(f"/jobs/{seeded.job_id}").body
    assert job_before["status"] == "RETIRED"

    reply = api.post(f"/executions/{execution_id}/retry")

    assert reply.status == 200, reply.body
    body = reply.body
    assert (body["status"], body["attempt_count"], body["max_attempts"]) == ("QUEUED", 3, 6)
    assert body["completed_at"] is None and body["duration_ms"] is None
    assert body["queue_position"] == 1  # due now
    run_at = datetime.fromisoformat(body["run_at"])
    assert abs(run_at - datetime.now(UTC)) < timedelta(minutes=5)
    assert body == {**api.get(f"/executions/{execution_id}").body, "queue_position": 1}
    kept = api.get(f"/executions/{execution_id}/attempts").body["items"]
    assert [a["attempt_number"] for a in kept] == [1, 2, 3]
    log = api.get(f"/executions/{execution_id}/logs").body["items"][-1]
    assert log["message"] == (
        "Execution requeued by POST /executions/{id}/retry. Attempts 4 to 6 allowed."
    )
    assert log["attempt_number"] == 3
    job = api.get(f"/jobs/{seeded.job_id}").body
    assert job["status"] == "ACTIVE"  # job_states derives it from the execution
    assert ids(api.get("/executions?status=FAILED")) == []


@pytest.mark.parametrize(
    "status", ["PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "CANCELLED"]
)
def test_only_a_failed_execution_can_be_retried(
    api: ApiClient, database: Database, status: str
) -> None:
    seeded = endpoint_with(database, 1)
    database.run(
        "UPDATE executions SET status = :s WHERE execution_id = :id",
        s=status,
        id=seeded.execution_id,
    )
    before = database.run(
        "SELECT * FROM executions WHERE execution_id = :id", id=seeded.execution_id
    )

    reply = api.post(f"/executions/{seeded.execution_id}/retry")

    assert (reply.status, reply.error_code) == (409, "EXECUTION_NOT_RETRYABLE"), reply.body
    assert status in reply.body["error"]["message"]
    after = database.run(
        "SELECT * FROM executions WHERE execution_id = :id", id=seeded.execution_id
    )
    assert after == before


def test_retry_of_an_unknown_execution_is_404_and_a_second_retry_is_409(
    api: ApiClient, database: Database
) -> None:
    reply = api.post("/executions/exec_unknown/retry")
    assert (reply.status, reply.error_code) == (404, "EXECUTION_NOT_FOUND")
    seeded = endpoint_with(database, 1)
    fail(database, seeded.execution_ids)
    assert api.post(f"/executions/{seeded.execution_id}/retry").status == 200
    again = api.post(f"/executions/{seeded.execution_id}/retry")
    assert (again.status, again.error_code) == (409, "EXECUTION_NOT_RETRYABLE")
    assert "is QUEUED" in again.body["error"]["message"]


def test_retry_is_refused_once_the_endpoint_is_deleted(api: ApiClient, database: Database) -> None:
    seeded = endpoint_with(database, 1)
    fail(database, seeded.execution_ids)
    assert api.delete(f"/endpoints/{seeded.endpoint}").status == 204

    reply = api.post(f"/executions/{seeded.execution_id}/retry")

    assert (reply.status, reply.error_code) == (409, "EXECUTION_NOT_RETRYABLE")
    assert "endpoint was deleted" in reply.body["error"]["message"]
    assert statuses(database, seeded.execution_ids) == {"FAILED": 1}


def test_a_retried_batch_child_makes_its_batch_run_again(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 1)
    items = [
        {
            "endpoint": seeded.endpoint,
            "trigger": "DELAYED",
            "run_at": "2030-01-01T00:00:00Z",
            "idempotency_key": f"b{i}",
            "input": {"user_id": "u"},
        }
        for i in range(2)
    ]
    created = api.post("/jobs/batch", {"jobs": items})
    assert created.status == 200, created.body
    batch_id = created.body["batch_id"]
    children = [
        r["execution_id"]
        for r in database.run(
            "SELECT execution_id FROM executions WHERE batch_id = :b ORDER BY execution_id",
            b=batch_id,
        )
    ]
    fail(database, children[:1])
    database.run(
        "UPDATE executions SET status = 'SUCCESS', completed_at = now() WHERE execution_id = :id",
        id=children[1],
    )
    done = api.get(f"/batches/{batch_id}").body
    assert done["status"] == "COMPLETED" and done["counts"]["FAILED"] == 1

    assert api.post(f"/executions/{children[0]}/retry").status == 200

    reopened = api.get(f"/batches/{batch_id}").body
    assert reopened["status"] == "RUNNING", reopened
    assert (reopened["counts"]["FAILED"], reopened["counts"]["QUEUED"]) == (0, 1)
