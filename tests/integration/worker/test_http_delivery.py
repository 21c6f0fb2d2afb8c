"""HTTP deliveries end to end: real PostgreSQL, a real HTTP server, the real worker."""

from __future__ import annotations

from chalicelib.db.connection import Database
from tests.fixtures.services import HttpTarget, Reply
from tests.integration.worker.conftest import settle
from tests.integration.worker.factories import (
    attempts,
    execution,
    http_spec,
    logs,
    seed,
)


def test_success_records_attempt_output_and_logs(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/ok", Reply(201, body="created"))
    seeded = seed(database, spec=http_spec(http_target.url("/ok")), inputs=[{"user_id": "u_1"}])

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS"
    assert row["output"] == {"status_code": 201, "body": "created"}
    assert row["attempt_count"] == 1 and row["completed_at"] is not None
    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["status"] == "SUCCESS" and attempt["attempt_number"] == 1
    assert attempt["output"] == {"status_code": 201, "body": "created"}
    [request] = http_target.received("/ok")
    assert request.json() == {"user_id": "u_1"}
    assert request.headers["x-task-executor-execution-id"] == seeded.execution_id
    assert request.headers["x-task-executor-attempt"] == "1"
    assert request.headers["idempotency-key"] == seeded.execution_id
    messages = [entry["message"] for entry in logs(database, seeded.execution_id)]
    assert messages[0].startswith("Attempt 1 claimed by worker")
    assert messages[1] == "Attempt 1 succeeded (status_code=201)."
