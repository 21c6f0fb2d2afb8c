"""Rows the worker reads, seeded with plain SQL (independent of the API under construction).

``jobs.endpoint_snapshot`` follows the shared contract: {name, type, spec, retry_policy,
config_ref, payload_spec_ref} with defaults applied.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.settings import decode_key
from chalicelib.worker.models import ClaimedExecution
from tests.support.environment import ENCRYPTION_KEY
from tests.support.factories import retry_policy as retry_policy  # re-exported: seeds use it

BOX = SecretBox(decode_key(ENCRYPTION_KEY, "test key"))


def http_spec(url: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "url": url,
        "method": "POST",
        "headers": {"Content-Type": "application/json"},
        "body_template": {"user_id": "{{input.user_id}}"},
        "timeout_ms": 2000,
        "expected_status_codes": [200, 201, 202, 204],
    }
    spec.update(extra)
    return spec


def create_config(db: Database, name: str, values: dict[str, Any]) -> None:
    db.run(
        "INSERT INTO configs (name, values_json) VALUES (:name, CAST(:values AS JSONB)) "
        "ON CONFLICT (name) DO UPDATE SET values_json = excluded.values_json",
        name=name,
        values=json.dumps(values),
    )


def create_secret(db: Database, name: str, value: str) -> None:
    db.run(
        "INSERT INTO secrets (name, encrypted_value) VALUES (:name, :blob) "
        "ON CONFLICT (name) DO UPDATE SET encrypted_value = excluded.encrypted_value",
        name=name,
        blob=BOX.encrypt(name, value),
    )


@dataclass(frozen=True)
class Seeded:
    job_id: str
    endpoint: str
    execution_ids: list[str]

    @property
    def execution_id(self) -> str:
        return self.execution_ids[0]


def seed(
    db: Database,
    *,
    spec: dict[str, Any],
    endpoint_type: str = "HTTP",
    policy: dict[str, Any] | None = None,
    config_ref: str | None = None,
    inputs: list[dict[str, Any]] | None = None,
    count: int = 1,
    status: str = "QUEUED",
) -> Seeded:
    """An endpoint, a job with its endpoint snapshot, and ``count`` due executions."""
    policy = policy or retry_policy()
    name = "ep-" + uuid.uuid4().hex[:10]
    inputs = inputs or [{"user_id": f"u{i}"} for i in range(count)]
    snapshot = {
        "name": name,
        "type": endpoint_type,
        "spec": spec,
        "retry_policy": policy,
        "config_ref": config_ref,
        "payload_spec_ref": None,
    }

    def work(tx: Transaction) -> Seeded:
        tx.run(
            "INSERT INTO endpoints (name, endpoint_type, config_ref, spec, retry_policy) "
            "VALUES (:name, :type, :config_ref, CAST(:spec AS JSONB), CAST(:policy AS JSONB))",
            name=name,
            type=endpoint_type,
            config_ref=config_ref,
            spec=json.dumps(spec),
            policy=json.dumps(policy),
        )
        job_id = tx.scalar(
            "INSERT INTO jobs (endpoint, endpoint_type, trigger_type, endpoint_snapshot) "
            "VALUES (:name, :type, 'IMMEDIATE', CAST(:snapshot AS JSONB)) RETURNING job_id",
            name=name,
            type=endpoint_type,
            snapshot=json.dumps(snapshot),
        )
        rows = tx.run(
            "INSERT INTO executions (job_id, endpoint, endpoint_type, status, input, "
            "max_attempts, idempotency_key) "
            "SELECT :job_id, :name, :type, :status, value, :max_attempts, "
            "'k-' || CAST(ordinality AS TEXT) "
            "FROM jsonb_array_elements(CAST(:inputs AS JSONB)) WITH ORDINALITY "
            "RETURNING execution_id",
            job_id=job_id,
            name=name,
            type=endpoint_type,
            status=status,
            inputs=json.dumps(inputs),
            max_attempts=policy["max_attempts"],
        )
        return Seeded(job_id, name, [r["execution_id"] for r in rows])

    return db.transaction(work, name="seed")


def execution(db: Database, execution_id: str) -> dict[str, Any]:
    rows = db.run("SELECT * FROM executions WHERE execution_id = :id", id=execution_id)
    return rows[0]


def attempts(db: Database, execution_id: str) -> list[dict[str, Any]]:
    return db.run(
        "SELECT * FROM attempts WHERE execution_id = :id ORDER BY attempt_number",
        id=execution_id,
    )


def logs(db: Database, execution_id: str) -> list[dict[str, Any]]:
    """The execution's log lines as GET /executions/{id}/logs reads them (its log rows and
    its attempts' lines, which are kept on the attempts rows)."""
    return db.run(
        queries["executions_logs_page"].sql,
        execution_id=execution_id,
        after_ts=None,
        after_id=None,
        limit_plus_one=10_000,
    )


def statuses(db: Database, execution_ids: list[str]) -> dict[str, int]:
    rows = db.run(
        "SELECT status, count(*) AS n FROM executions "
        "WHERE execution_id = ANY(CAST(:ids AS TEXT[])) GROUP BY status",
        ids=execution_ids,
    )
    return {r["status"]: int(r["n"]) for r in rows}


def make_due(db: Database, execution_ids: list[str]) -> None:
    """Bring RETRYING executions' run_at to now (instead of waiting out a backoff)."""
    db.run(
        "UPDATE executions SET run_at = now() "
        "WHERE execution_id = ANY(CAST(:ids AS TEXT[])) AND status = 'RETRYING'",
        ids=execution_ids,
    )


def claimed_execution(
    execution_id: str, endpoint: str, *, attempt: int = 1, cap: int | None = None
) -> ClaimedExecution:
    """An execution as a claim hands it to the worker, without a database row behind it
    (for the ledger's bookkeeping: slots, shares, leases)."""
    return ClaimedExecution(
        execution_id=execution_id,
        job_id="job",
        endpoint=endpoint,
        endpoint_type="HTTP",
        input={},
        attempt=attempt,
        max_attempts=3,
        config_snapshot=None,
        endpoint_snapshot={},
        endpoint_cap=cap,
    )
