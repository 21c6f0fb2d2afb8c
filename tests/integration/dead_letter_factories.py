"""Dead letters seeded with plain SQL: FAILED executions with the attempts that failed them,
as the worker leaves them (issue 18, point 3)."""

from __future__ import annotations

import json
from datetime import datetime

from chalicelib.db.connection import Database


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
    ``error_type``; the earlier ones TIMEOUT), created at ``created_at`` when given."""
    db.run(
        "UPDATE executions SET status = 'FAILED', attempt_count = :n, max_attempts = :n,"
        " started_at = now(), completed_at = now(), duration_ms = 7, worker_id = 'w-old',"
        " created_at = COALESCE(CAST(:created_at AS TIMESTAMPTZ), created_at)"
        " WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
        ids=execution_ids,
        n=attempts,
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
