"""Rows for job and execution tests, written with plain SQL.

The jobs tests must not depend on the setup routes (another area), so they seed payload
specs, configs and endpoints directly, and move executions into the states a worker or the
scheduler would (RUNNING, SUCCESS, ...) without going through them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries

USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string"},
        "order_id": {"type": "string"},
        "count": {"type": "integer", "minimum": 0},
    },
    "required": ["user_id"],
}

HTTP_SPEC: dict[str, Any] = {
    "url": "https://api.example.com/emails/welcome",
    "method": "POST",
    "headers": {"Content-Type": "application/json"},
    "body_template": {"user_id": "{{input.user_id}}"},
    "timeout_ms": 5000,
    "expected_status_codes": [200, 201, 202, 204],
}


def payload_spec(db: Database, name: str = "welcome-input", schema: Any = None) -> str:
    db.execute(
        "INSERT INTO payload_specs (name, schema_json) VALUES (:name, CAST(:schema AS JSONB))",
        name=name,
        schema=json.dumps(schema or USER_SCHEMA),
    )
    return name


def config(db: Database, name: str = "email-service", values: Any = None) -> str:
    db.execute(
        "INSERT INTO configs (name, values_json) VALUES (:name, CAST(:values AS JSONB))",
        name=name,
        values=json.dumps(values or {"api_base_url": "https://api.example.com"}),
    )
    return name


def endpoint(
    db: Database,
    name: str = "send-welcome-email",
    *,
    endpoint_type: str = "HTTP",
    payload_spec_ref: str | None = None,
    config_ref: str | None = None,
    spec: Any = None,
    retry_policy: Any = None,
) -> str:
    db.execute(
        "INSERT INTO endpoints (name, endpoint_type, payload_spec_ref, config_ref, spec,"
        " retry_policy) VALUES (:name, :type, CAST(:ps AS TEXT), CAST(:cfg AS TEXT),"
        " CAST(:spec AS JSONB), CAST(:retry AS JSONB))",
        name=name,
        type=endpoint_type,
        ps=payload_spec_ref,
        cfg=config_ref,
        spec=json.dumps(spec or HTTP_SPEC),
        retry=None if retry_policy is None else json.dumps(retry_policy),
    )
    return name


def welcome_endpoint(db: Database, **kwargs: Any) -> str:
    """An HTTP endpoint with a payload spec requiring ``user_id`` and a config."""
    return endpoint(
        db,
        payload_spec_ref=payload_spec(db),
        config_ref=config(db),
        retry_policy=kwargs.pop(
            "retry_policy",
            {
                "max_attempts": 3,
                "backoff": "exponential",
                "initial_delay_ms": 1000,
                "max_delay_ms": 30000,
            },
        ),
        **kwargs,
    )


def set_execution(db: Database, execution_id: str, **columns: Any) -> None:
    """Force columns of an execution (the state a worker or scheduler would leave)."""
    assignments = ", ".join(f"{name} = :{name}" for name in columns)
    db.execute(
        f"UPDATE executions SET {assignments} WHERE execution_id = :execution_id",
        execution_id=execution_id,
        **columns,
    )


def add_execution(
    db: Database,
    job_id: str,
    *,
    status: str,
    created_at: datetime,
    duration_ms: int | None = None,
    run_at: datetime | None = None,
) -> str:
    """A further execution of a job (a cron tick), with its created_at and duration."""
    rows = db.run(
        "INSERT INTO executions (job_id, endpoint, endpoint_type, status, created_at,"
        " duration_ms, run_at, input)"
        " SELECT job_id, endpoint, endpoint_type, :status, :created_at, CAST(:duration AS BIGINT),"
        " COALESCE(CAST(:run_at AS TIMESTAMPTZ), :created_at), input FROM jobs"
        " WHERE job_id = :job_id RETURNING execution_id",
        job_id=job_id,
        status=status,
        created_at=created_at,
        duration=duration_ms,
        run_at=run_at,
    )
    return str(rows[0]["execution_id"])


def add_attempt(db: Database, execution_id: str, number: int, status: str) -> str:
    rows = db.run(
        "INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,"
        " duration_ms, output, error) VALUES (:id, :n, :status, now(), now(), 12,"
        " CAST(:output AS JSONB), CAST(:error AS JSONB)) RETURNING attempt_id",
        id=execution_id,
        n=number,
        status=status,
        output=json.dumps({"status_code": 200}) if status == "SUCCESS" else None,
        error=None if status == "SUCCESS" else json.dumps({"type": "TIMEOUT", "message": "t"}),
    )
    return str(rows[0]["attempt_id"])


def add_log(db: Database, execution_id: str, message: str, logged_at: datetime) -> str:
    rows = db.run(
        "INSERT INTO execution_logs (execution_id, attempt_number, level, message, logged_at)"
        " VALUES (:id, 0, 'INFO', :message, :at) RETURNING log_id",
        id=execution_id,
        message=message,
        at=logged_at,
    )
    return str(rows[0]["log_id"])


def record_attempts(
    db: Database,
    execution_id: str,
    attempts: list[tuple[str, int, str | None]],
    *,
    worker_id: str = "worker-test",
) -> None:
    """Deliver ``execution_id`` as a worker records it: each ``(next status, duration ms,
    error type)`` is one claim (RUNNING, this worker, the next attempt number) and one
    worker_finalize_batch statement, which writes the attempt, moves the execution on and
    adds to the delivery summary rows. A RETRYING or FAILED next status is a FAILED attempt
    with that error type."""
    for next_status, duration_ms, error_type in attempts:
        row = db.run(
            "UPDATE executions SET status = 'RUNNING', worker_id = :w, started_at = now(),"
            " attempt_count = attempt_count + 1 WHERE execution_id = :id"
            " RETURNING attempt_count",
            w=worker_id,
            id=execution_id,
        )[0]
        now = datetime.now(UTC).isoformat()
        result: dict[str, Any] = {
            "execution_id": execution_id,
            "attempt_number": row["attempt_count"],
            "attempt_status": "SUCCESS" if next_status == "SUCCESS" else "FAILED",
            "next_status": next_status,
            "started_at": now,
            "completed_at": now,
            "duration_ms": duration_ms,
            "log_level": "INFO" if next_status == "SUCCESS" else "WARN",
            "log_message": f"Attempt {row['attempt_count']} ended {next_status}.",
            "retry_delay_ms": 0,
        }
        if error_type is not None:
            result["error"] = {"type": error_type, "message": "test"}
        moved = db.run(
            queries["worker_finalize_batch"],
            results=json.dumps([result]),
            worker_id=worker_id,
            writer=f"{worker_id}/test",
        )
        assert [r["execution_id"] for r in moved] == [execution_id]
