"""Dead letters seeded with plain SQL: FAILED executions with the attempts that failed them,
as the worker leaves them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed.worker import Seeded, http_spec, retry_policy, seed

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
URL = "http://127.0.0.1:9/unused"  # nothing is delivered where these are used


def endpoint_with(db: Database, count: int, *, max_attempts: int = 3) -> Seeded:
    """An endpoint, its job and ``count`` QUEUED executions (see :func:`fail`)."""
    return seed(db, spec=http_spec(URL), policy=retry_policy(max_attempts), count=count)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


#: A redrive range around T0's first hour.
RANGE = {"since": iso(T0), "until": iso(T0 + timedelta(hours=1))}


def ids(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [item["execution_id"] for item in reply.body["items"]]


def assert_invalid(reply: Any, fragment: str) -> None:
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body
    assert fragment in reply.body["error"]["message"], reply.body
    assert reply.body["error"]["request_id"]


def redrive(api: ApiClient, endpoint: str, **body: Any) -> Any:
    return api.post(f"/endpoints/{endpoint}/redrive", body)


def fail(
    db: Database,
    execution_ids: list[str],
    *,
    attempts: int = 2,
    error_type: str = "HTTP_ERROR",
    message: str = "HTTP 503 from target",
    created_at: datetime | None = None,
) -> None:
    """Make executions FAILED after ``attempts`` failed attempts (the last with
    ``error_type``; the earlier ones TIMEOUT), created at ``created_at`` when given, with
    ``last_error_type`` as the finalize writes it."""
    db.run(
        "UPDATE executions SET status = 'FAILED', attempt_count = :n, max_attempts = :n,"
        " last_error_type = :error_type,"
        " started_at = now(), completed_at = now(), duration_ms = 7, worker_id = 'w-old',"
        " created_at = COALESCE(CAST(:created_at AS TIMESTAMPTZ), created_at)"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=execution_ids,
        n=attempts,
        error_type=error_type,
        created_at=created_at,
    )
    for number in range(1, attempts + 1):
        last = number == attempts
        error = {"type": error_type if last else "TIMEOUT", "message": message if last else "t"}
        db.run(
            "INSERT INTO attempts (execution_id, attempt_number, status, started_at,"
            " completed_at, duration_ms, error)"
            " SELECT id, :n, 'FAILED', now(), now(), 7, CAST(:error AS JSONB)"
            " FROM unnest(CAST(:ids AS TEXT[])) AS id",
            ids=execution_ids,
            n=number,
            error=json.dumps(error),
        )
