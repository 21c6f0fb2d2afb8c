"""Seeds endpoints, jobs and executions with plain SQL, so scheduler tests do not depend on
the API or the worker, plus a few read helpers (the clock they move is tests/support/clock.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from chalicelib.db.connection import Database
from tests.support.clock import T0
from tests.support.factories import UNREACHABLE_URL, retry_policy


def utc(text: str) -> datetime:
    """``"2026-03-16T09:00"`` -> an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def seed_endpoint(db: Database, name: str = "ep-test", *, max_attempts: int = 3) -> str:
    db.execute(
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) "
        "VALUES (:name, 'HTTP', CAST(:spec AS JSONB), CAST(:policy AS JSONB))",
        name=name,
        spec=json.dumps({"url": UNREACHABLE_URL + "x", "method": "POST"}),
        policy=json.dumps(_policy(max_attempts)),
    )
    return name


def _policy(max_attempts: int) -> dict[str, Any]:
    return retry_policy(max_attempts, "exponential", initial_delay_ms=1000)


def _snapshot(endpoint: str, max_attempts: int | None) -> str:
    snapshot: dict[str, Any] = {
        "name": endpoint,
        "type": "HTTP",
        "spec": {"url": UNREACHABLE_URL + "x", "method": "POST"},
        "config_ref": None,
        "payload_spec_ref": None,
    }
    if max_attempts is not None:
        snapshot["retry_policy"] = _policy(max_attempts)
    return json.dumps(snapshot)


def seed_cron_job(
    db: Database,
    *,
    endpoint: str = "ep-test",
    cron: str = "* * * * *",
    timezone: str = "UTC",
    next_run_at: datetime = T0,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    job_input: dict[str, Any] | None = None,
    max_attempts: int | None = 3,
) -> str:
    """An ACTIVE CRON job whose next tick is ``next_run_at``."""
    return str(
        db.run(
            "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, input, cron_expression, "
            "cron_timezone, cron_starts_at, cron_ends_at, cron_next_run_at, endpoint_snapshot) "
            "VALUES (:endpoint, 'HTTP', 'CRON', CAST(:input AS JSONB), :cron, :tz, "
            "CAST(:starts AS TIMESTAMPTZ), CAST(:ends AS TIMESTAMPTZ), :next, "
            "CAST(:snapshot AS JSONB)) RETURNING job_id",
            endpoint=endpoint,
            input=json.dumps(job_input if job_input is not None else {"user_id": "u_1"}),
            cron=cron,
            tz=timezone,
            starts=starts_at,
            ends=ends_at,
            next=next_run_at,
            snapshot=_snapshot(endpoint, max_attempts),
        )[0]["job_id"]
    )


def seed_one_shot_job(db: Database, *, endpoint: str = "ep-test", key: str = "k1") -> str:
    return str(
        db.run(
            "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, idempotency_key, input) "
            "VALUES (:endpoint, 'HTTP', 'DELAYED', :key, CAST('{}' AS JSONB)) RETURNING job_id",
            endpoint=endpoint,
            key=key,
        )[0]["job_id"]
    )


def seed_execution(
    db: Database,
    *,
    job_id: str,
    status: str,
    run_at: datetime,
    endpoint: str = "ep-test",
    attempt_count: int = 0,
    max_attempts: int = 3,
    started_at: datetime | None = None,
    worker_id: str | None = None,
) -> str:
    return str(
        db.run(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, run_at, "
            "attempt_count, max_attempts, started_at, worker_id, input) "
            "VALUES (:job_id, :endpoint, 'HTTP', :status, :run_at, :attempts, :max_attempts, "
            "CAST(:started AS TIMESTAMPTZ), :worker, CAST('{}' AS JSONB)) RETURNING execution_id",
            job_id=job_id,
            endpoint=endpoint,
            status=status,
            run_at=run_at,
            attempts=attempt_count,
            max_attempts=max_attempts,
            started=started_at,
            worker=worker_id,
        )[0]["execution_id"]
    )


def retire(db: Database, job_id: str) -> None:
    db.execute(
        "UPDATE jobs SET status = 'RETIRED', retired_at = now() WHERE job_id = :id", id=job_id
    )


def job(db: Database, job_id: str) -> dict[str, Any]:
    return db.run("SELECT * FROM jobs WHERE job_id = :id", id=job_id)[0]


def execution(db: Database, execution_id: str) -> dict[str, Any]:
    return db.run("SELECT * FROM executions WHERE execution_id = :id", id=execution_id)[0]


def executions_of(db: Database, job_id: str) -> list[dict[str, Any]]:
    return db.run("SELECT * FROM executions WHERE job_id = :id ORDER BY run_at", id=job_id)


def logs_of(db: Database, execution_id: str) -> list[dict[str, Any]]:
    return db.run(
        "SELECT * FROM execution_logs WHERE execution_id = :id ORDER BY logged_at",
        id=execution_id,
    )


def attempts_of(db: Database, execution_id: str) -> list[dict[str, Any]]:
    return db.run(
        "SELECT * FROM attempts WHERE execution_id = :id ORDER BY attempt_number",
        id=execution_id,
    )
