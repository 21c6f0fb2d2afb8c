"""POST /endpoints/{name}/redrive: what it moves, in bounded batches,
idempotent, under concurrency, and every bad input with its envelope."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.dead_letters import RedriveRequest
from chalicelib.errors import ExecutionNotRetryable
from chalicelib.services import dead_letters as service
from tests.support.api_client import ApiClient
from tests.support.seed.dead_letters import (
    RANGE,
    T0,
    assert_invalid,
    endpoint_with,
    fail,
    redrive,
)
from tests.support.seed.worker import statuses


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
