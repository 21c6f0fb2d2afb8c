"""Dead letters through the API (issue 18, point 3): the listing GET /executions, retry of
one FAILED execution, redrive of an endpoint's, every bad input with its envelope, and the
plans of the new statements (they read migration 007's indexes, not the history)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.domain.dead_letters import RedriveRequest
from chalicelib.errors import ExecutionNotRetryable
from chalicelib.services import dead_letters as service
from tests.conftest import ApiClient
from tests.integration.dead_letter_factories import fail
from tests.integration.test_lifecycle_plans import indexes_used, nodes
from tests.integration.worker.factories import Seeded, http_spec, retry_policy, seed, statuses

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
URL = "http://127.0.0.1:9/unused"  # nothing is delivered in this module


def endpoint_with(db: Database, count: int, *, max_attempts: int = 3) -> Seeded:
    return seed(db, spec=http_spec(URL), policy=retry_policy(max_attempts), count=count)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def ids(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [item["execution_id"] for item in reply.body["items"]]


def assert_invalid(reply: Any, fragment: str) -> None:
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body
    assert fragment in reply.body["error"]["message"], reply.body
    assert reply.body["error"]["request_id"]


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


# -- redrive -------------------------------------------------------------------------------


def redrive(api: ApiClient, endpoint: str, **body: Any) -> Any:
    return api.post(f"/endpoints/{endpoint}/redrive", body)


RANGE = {"since": iso(T0), "until": iso(T0 + timedelta(hours=1))}


def test_redrive_requeues_the_matching_dead_letters_only_and_is_idempotent(
    api: ApiClient, database: Database
) -> None:
    a, other = endpoint_with(database, 5), endpoint_with(database, 1)
    fail(database, a.execution_ids[:2], created_at=T0 + timedelta(minutes=5))
    fail(database, a.execution_ids[2:3], created_at=T0 + timedelta(minutes=6), error_type="TIMEOUT")
    fail(database, a.execution_ids[3:4], created_at=T0 + timedelta(hours=2))  # out of range
    fail(database, other.execution_ids, created_at=T0 + timedelta(minutes=5))  # other endpoint

    first = redrive(api, a.endpoint, error_type="HTTP_ERROR", **RANGE)

    assert (first.status, first.body) == (200, {"requeued": 2, "more": False})
    assert statuses(database, a.execution_ids[:2]) == {"QUEUED": 2}
    assert statuses(database, a.execution_ids[2:4]) == {"FAILED": 2}
    assert statuses(database, other.execution_ids) == {"FAILED": 1}
    assert redrive(api, a.endpoint, error_type="HTTP_ERROR", **RANGE).body == {
        "requeued": 0,
        "more": False,
    }
    any_type = redrive(api, a.endpoint, **RANGE)
    assert any_type.body == {"requeued": 1, "more": False}  # the TIMEOUT one
    row = database.run(
        "SELECT attempt_count, max_attempts FROM executions WHERE execution_id = :id",
        id=a.execution_ids[0],
    )[0]
    assert (row["attempt_count"], row["max_attempts"]) == (2, 5)
    [line] = [
        r["message"]
        for r in database.run(
            "SELECT message FROM execution_logs WHERE execution_id = :id", id=a.execution_ids[0]
        )
    ]
    assert line == "Execution requeued by a redrive of its endpoint. Attempts 3 to 5 allowed."


def test_redrive_of_a_thousand_dead_letters_moves_them_in_bounded_batches(
    api: ApiClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = endpoint_with(database, 1001)
    fail(database, seeded.execution_ids[:1000], created_at=T0 + timedelta(minutes=1))
    fail(database, seeded.execution_ids[1000:], created_at=T0 - timedelta(minutes=1))
    monkeypatch.setattr(service, "REDRIVE_BATCH", 120)
    monkeypatch.setattr(service, "REDRIVE_MAX_PER_REQUEST", 400)

    replies = [redrive(api, seeded.endpoint, **RANGE).body for _ in range(4)]

    assert replies == [
        {"requeued": 400, "more": True},
        {"requeued": 400, "more": True},
        {"requeued": 200, "more": False},
        {"requeued": 0, "more": False},
    ]
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 1000, "FAILED": 1}


def test_redrive_of_a_thousand_in_one_request_with_the_default_bounds(
    api: ApiClient, database: Database
) -> None:
    seeded = endpoint_with(database, 1000)
    fail(database, seeded.execution_ids, created_at=T0 + timedelta(minutes=1))
    assert redrive(api, seeded.endpoint, **RANGE).body == {"requeued": 1000, "more": False}
    assert redrive(api, seeded.endpoint, **RANGE).body == {"requeued": 0, "more": False}
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 1000}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"until": "2026-03-01T13:00:00Z"}, "'since' is required"),
        ({"since": "2026-03-01T12:00:00Z"}, "'until' is required"),
        ({"since": "noon", "until": "2026-03-01T13:00:00Z"}, "not an ISO 8601 timestamp"),
        ({"since": 5, "until": "2026-03-01T13:00:00Z"}, "must be an ISO 8601 timestamp string"),
        ({"since": "2026-03-01T12:00:00", "until": "2026-03-01T13:00:00Z"}, "UTC offset"),
        ({"since": "2026-03-01T13:00:00Z", "until": "2026-03-01T12:00:00Z"}, "earlier than"),
        ({**RANGE, "error_type": "timeout"}, "error_type must be an error type"),
        ({**RANGE, "error_type": 3}, "error_type must be an error type"),
        ({**RANGE, "status": "FAILED"}, "Unknown field(s) for a redrive: status"),
    ],
)
def test_every_bad_redrive_body_is_a_400_with_the_envelope_and_moves_nothing(
    api: ApiClient, database: Database, body: dict[str, Any], fragment: str
) -> None:
    seeded = endpoint_with(database, 1)
    fail(database, seeded.execution_ids, created_at=T0 + timedelta(minutes=1))
    assert_invalid(redrive(api, seeded.endpoint, **body), fragment)
    assert statuses(database, seeded.execution_ids) == {"FAILED": 1}


def test_a_redrive_without_a_json_object_body_is_a_400(api: ApiClient, database: Database) -> None:
    seeded = endpoint_with(database, 1)
    for raw in (b"", b"[1]", b"{"):
        reply = api.request("POST", f"/endpoints/{seeded.endpoint}/redrive", raw=raw)
        assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body


def test_redrive_of_an_unknown_or_deleted_endpoint_is_404(
    api: ApiClient, database: Database
) -> None:
    reply = redrive(api, "no-such-endpoint", **RANGE)
    assert (reply.status, reply.error_code) == (404, "ENDPOINT_NOT_FOUND")
    seeded = endpoint_with(database, 1)
    fail(database, seeded.execution_ids, created_at=T0 + timedelta(minutes=1))
    assert api.delete(f"/endpoints/{seeded.endpoint}").status == 204
    gone = redrive(api, seeded.endpoint, **RANGE)
    assert (gone.status, gone.error_code) == (404, "ENDPOINT_NOT_FOUND")
    assert statuses(database, seeded.execution_ids) == {"FAILED": 1}


def test_the_routes_need_the_api_key(api: ApiClient) -> None:
    for method, path in (
        ("GET", "/executions?status=FAILED"),
        ("POST", "/executions/exec_x/retry"),
        ("POST", "/endpoints/x/redrive"),
    ):
        reply = api.request(method, path, body={}, auth=False)
        assert (reply.status, reply.error_code) == (401, "UNAUTHORIZED"), (method, path)


# -- plans ---------------------------------------------------------------------------------


@pytest.fixture
def history(database: Database) -> Seeded:
    """20,000 executions of history (SUCCESS) around 50 dead letters."""
    seeded = endpoint_with(database, 50)
    fail(database, seeded.execution_ids, created_at=T0)
    database.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, created_at)"
        " SELECT :job, :endpoint, 'HTTP', 'SUCCESS',"
        " CAST(:t0 AS TIMESTAMPTZ) - g * INTERVAL '1 second'"
        " FROM generate_series(1, 20000) AS g",
        job=seeded.job_id,
        endpoint=seeded.endpoint,
        t0=T0,
    )
    database.run("ANALYZE executions")
    return seeded


def no_history_scan(database: Database, query: str, **params: Any) -> set[str]:
    """The indexes ``query`` reads, after checking that, planned freely (sequential scans
    allowed), it reads no table of executions or attempts sequentially."""

    def explain(tx: Any) -> Any:
        return tx.run("EXPLAIN (FORMAT JSON) " + queries[query].sql, **params)[0]

    document = next(iter(database.transaction(explain).values()))
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    scanned = {n.get("Relation Name") for n in nodes(plan) if n["Node Type"] == "Seq Scan"}
    assert not scanned & {"executions", "attempts"}, plan
    return indexes_used(database, query, **params)


@pytest.mark.parametrize("endpoint", [True, False])
def test_the_dead_letter_view_reads_the_status_index(
    database: Database, history: Seeded, endpoint: bool
) -> None:
    params = {
        "statuses": ["FAILED"],
        "endpoint": history.endpoint if endpoint else None,
        "since": None,
        "until": None,
        "error_type": None,
        "after_ts": None,
        "after_id": None,
        "limit_plus_one": 51,
    }
    used = no_history_scan(database, "dead_letters_list", **params)
    assert "idx_executions_by_status" in used, used
    every_status = no_history_scan(
        database, "dead_letters_list", **{**params, "statuses": ["SUCCESS", "FAILED", "QUEUED"]}
    )
    assert "idx_executions_by_status" in every_status, every_status


def test_the_dead_letters_of_one_endpoint_read_its_partial_index(
    database: Database, history: Seeded
) -> None:
    params = {
        "endpoint": history.endpoint,
        "since": None,
        "until": None,
        "error_type": "HTTP_ERROR",
        "after_ts": None,
        "after_id": None,
        "limit_plus_one": 51,
    }
    used = no_history_scan(database, "dead_letters_list_failed_of_endpoint", **params)
    assert "idx_executions_failed_by_endpoint" in used, used


def test_redrive_walks_the_partial_index_of_an_endpoints_dead_letters(
    database: Database, history: Seeded
) -> None:
    params = {
        "endpoint": history.endpoint,
        "since": T0 - timedelta(hours=1),
        "until": T0 + timedelta(hours=1),
        "error_type": "HTTP_ERROR",
    }
    batch = no_history_scan(
        database,
        "dead_letters_redrive_batch",
        **params,
        batch=500,
        sources=["FAILED"],
        message="m",
    )
    assert "idx_executions_failed_by_endpoint" in batch, batch
    more = no_history_scan(database, "dead_letters_redrive_more", **params)
    assert "idx_executions_failed_by_endpoint" in more, more


# -- concurrency ---------------------------------------------------------------------------


def test_concurrent_redrives_and_retries_requeue_each_dead_letter_once(
    database: Database,
) -> None:
    """Four redrives of one range and retries of its rows at once: every dead letter is
    requeued exactly once (the CAS on FAILED; 40001 retried by the transaction helper)."""
    seeded = endpoint_with(database, 600)
    fail(database, seeded.execution_ids, created_at=T0 + timedelta(minutes=1))
    dead_letters = service.DeadLetterService(database, wakeup_notify="off")
    request = RedriveRequest(since=T0, until=T0 + timedelta(hours=1))
    results: list[int] = []
    errors: list[BaseException] = []

    def redrive_once() -> None:
        try:
            results.append(dead_letters.redrive(seeded.endpoint, request).requeued)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def retry_some() -> None:
        for execution_id in seeded.execution_ids[:20]:
            try:
                dead_letters.retry(execution_id)
                results.append(1)
            except ExecutionNotRetryable:
                pass

    threads = [threading.Thread(target=redrive_once) for _ in range(4)]
    threads.append(threading.Thread(target=retry_some))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert sum(results) == 600
    assert statuses(database, seeded.execution_ids) == {"QUEUED": 600}
    logged = database.run(
        "SELECT count(*) AS n FROM execution_logs WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=seeded.execution_ids,
    )
    assert logged[0]["n"] == 600  # one requeue line each
