"""HTTP deliveries end to end: real PostgreSQL, a real HTTP server, the real worker."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.delivery import DeliveryRequest
from chalicelib.worker.dispatchers.http import HttpDispatcher
from tests.support.seed.worker import (
    attempts,
    create_config,
    create_secret,
    execution,
    http_spec,
    logs,
    make_due,
    retry_policy,
    seed,
)
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle


def test_success_records_attempt_output_and_logs(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/ok", Reply(201, body="created"))
    seeded = seed(database, spec=http_spec(http_target.url("/ok")), inputs=[{"user_id": "u_1"}])

    worker = make_worker()
    settle(worker, database, seeded.execution_ids)

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
    assert messages == [f"Attempt 1 succeeded (status_code=201). [worker {worker.worker_id}]"]


def _only_attempt(database: Database, execution_id: str) -> dict:
    rows = attempts(database, execution_id)
    assert len(rows) == 1, rows
    return rows[0]


def test_unexpected_status_fails_with_http_error(
    database: Database, make_worker, http_target
) -> None:
    http_target.script("/teapot", Reply(418, body="no"))
    seeded = seed(database, spec=http_spec(http_target.url("/teapot")))

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "FAILED" and row["completed_at"] is not None
    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "HTTP_ERROR" and error["status_code"] == 418
    assert logs(database, seeded.execution_id)[-1]["level"] == "ERROR"


def test_timeout(database: Database, make_worker, http_target) -> None:
    http_target.script("/slow", Reply(200, delay=1.0))
    seeded = seed(database, spec=http_spec(http_target.url("/slow"), timeout_ms=200))

    settle(make_worker(), database, seeded.execution_ids)

    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error == {"type": "TIMEOUT", "message": "no response within 200 ms"}


def test_connection_refused(database: Database, make_worker) -> None:
    from tests.support.served import free_port

    seeded = seed(database, spec=http_spec(f"http://127.0.0.1:{free_port()}/x"))

    settle(make_worker(), database, seeded.execution_ids)

    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "CONNECTION_ERROR"
    assert "refused" in error["message"]


def test_retry_then_success(database: Database, make_worker, http_target) -> None:
    http_target.script("/flaky", Reply(500), Reply(200, body="ok"))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/flaky")),
        policy=retry_policy(max_attempts=3, initial_delay_ms=0),
    )

    settle(make_worker(), database, seeded.execution_ids)

    rows = attempts(database, seeded.execution_id)
    assert [(a["attempt_number"], a["status"]) for a in rows] == [(1, "FAILED"), (2, "SUCCESS")]
    assert rows[0]["error"]["status_code"] == 500
    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS" and row["attempt_count"] == 2
    assert [r.headers["x-task-executor-attempt"] for r in http_target.received("/flaky")] == [
        "1",
        "2",
    ]
    levels = [entry["level"] for entry in logs(database, seeded.execution_id)]
    assert levels == ["WARN", "INFO"]


def test_retries_exhausted(database: Database, make_worker, http_target) -> None:
    http_target.script("/down", Reply(500))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/down")),
        policy=retry_policy(max_attempts=2, initial_delay_ms=0),
    )
    worker = make_worker()

    settle(worker, database, seeded.execution_ids)

    assert [a["status"] for a in attempts(database, seeded.execution_id)] == ["FAILED", "FAILED"]
    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    last = logs(database, seeded.execution_id)[-1]["message"]
    assert last.endswith(f"execution failed: 2 attempts exhausted. [worker {worker.worker_id}]")


def test_retry_after_overrides_backoff(database: Database, make_worker, http_target) -> None:
    http_target.script("/busy", Reply(429, headers={"Retry-After": "3"}), Reply(200))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/busy")),
        policy=retry_policy(max_attempts=2, initial_delay_ms=10, max_delay_ms=60000),
    )
    worker = make_worker()

    worker.run_once()
    worker.drain(10)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "RETRYING" and row["worker_id"] is None
    first = _only_attempt(database, seeded.execution_id)
    assert (row["run_at"] - first["completed_at"]).total_seconds() >= 2.9
    assert (
        "scheduled in 3000 ms (Retry-After)" in logs(database, seeded.execution_id)[-1]["message"]
    )
    assert worker.run_once() == 0  # not due yet
    make_due(database, seeded.execution_ids)
    settle(worker, database, seeded.execution_ids)
    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"


def test_retry_after_is_capped_by_max_delay(database: Database, make_worker, http_target) -> None:
    http_target.script("/busy", Reply(503, headers={"Retry-After": "3600"}))
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/busy")),
        policy=retry_policy(max_attempts=2, initial_delay_ms=10, max_delay_ms=1500),
    )
    worker = make_worker()
    worker.run_once()
    worker.drain(10)
    assert (
        "scheduled in 1500 ms (Retry-After)" in logs(database, seeded.execution_id)[-1]["message"]
    )


def test_template_failure_fails_without_retry(database: Database, make_worker, http_target) -> None:
    spec = http_spec(http_target.url("/t"), body_template={"x": "{{input.missing}}"})
    seeded = seed(database, spec=spec, policy=retry_policy(max_attempts=3))

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "TEMPLATE_RESOLUTION_FAILED"
    assert "{{input.missing}}" in error["message"]
    assert http_target.received() == []


def test_numeric_placeholders_keep_their_json_type(
    database: Database, make_worker, http_target
) -> None:
    create_config(database, "limits", {"limit": 10, "base": http_target.url("")})
    spec = http_spec(
        "{{config.base}}/n",
        body_template={
            "amount": "{{input.amount}}",
            "label": "n={{input.amount}}",
            "limit": "{{config.limit}}",
            "user": "{{input.user.name}}",
        },
    )
    seeded = seed(
        database,
        spec=spec,
        config_ref="limits",
        inputs=[{"amount": 42.5, "user": {"name": "Ada"}}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    [request] = http_target.received("/n")
    assert request.json() == {"amount": 42.5, "label": "n=42.5", "limit": 10, "user": "Ada"}
    assert execution(database, seeded.execution_id)["config_snapshot"] == {
        "limit": 10,
        "base": http_target.url(""),
    }


def test_config_snapshot_is_reused_on_retry(database: Database, make_worker, http_target) -> None:
    http_target.script("/v1", Reply(500), Reply(200))
    create_config(database, "svc", {"base": http_target.url("/v1")})
    seeded = seed(
        database,
        spec=http_spec("{{config.base}}"),
        config_ref="svc",
        policy=retry_policy(max_attempts=2, initial_delay_ms=0),
    )
    worker = make_worker(config_cache_ttl_sec=0)  # every read goes to the table
    worker.run_once()
    worker.drain(10)
    create_config(database, "svc", {"base": http_target.url("/v2")})

    settle(worker, database, seeded.execution_ids)

    assert [r.path for r in http_target.received()] == ["/v1", "/v1"]
    assert execution(database, seeded.execution_id)["config_snapshot"] == {
        "base": http_target.url("/v1")
    }


def test_secrets_reach_the_target_but_never_attempts_or_logs(
    database: Database, make_worker, http_target, caplog
) -> None:
    secret = "sk-live-0123456789abcdef"
    create_secret(database, "api_key", secret)
    # The target echoes the key back, as some error pages do.
    http_target.script("/echo", Reply(500, body=f"bad key {secret}"))
    spec = http_spec(
        http_target.url("/echo"),
        headers={"Authorization": "Bearer {{secret.api_key}}"},
        body_template={"key": "{{secret.api_key}}"},
    )
    seeded = seed(database, spec=spec, policy=retry_policy(max_attempts=2, initial_delay_ms=0))

    with caplog.at_level("DEBUG"):
        settle(make_worker(), database, seeded.execution_ids)

    received = http_target.received("/echo")
    assert received[0].headers["authorization"] == f"Bearer {secret}"
    stored = json.dumps(
        [
            execution(database, seeded.execution_id),
            attempts(database, seeded.execution_id),
            logs(database, seeded.execution_id),
        ],
        default=str,
    )
    assert secret not in stored
    assert "[REDACTED]" in stored
    assert secret not in caplog.text


def test_missing_secret_is_a_template_failure(database: Database, make_worker, http_target) -> None:
    spec = http_spec(http_target.url("/s"), headers={"X-Key": "{{secret.nope}}"})
    seeded = seed(database, spec=spec)
    settle(make_worker(), database, seeded.execution_ids)
    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "TEMPLATE_RESOLUTION_FAILED"


def test_header_injection_is_refused(database: Database, make_worker, http_target) -> None:
    spec = http_spec(http_target.url("/h"), headers={"X-Name": "{{input.name}}"})
    seeded = seed(
        database,
        spec=spec,
        inputs=[{"user_id": "u", "name": "a\r\nX-Injected: yes"}],
        policy=retry_policy(max_attempts=3),
    )

    settle(make_worker(), database, seeded.execution_ids)

    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "TEMPLATE_RESOLUTION_FAILED"
    assert "CR, LF or NUL" in error["message"]
    assert http_target.received() == []


def test_redirects_are_not_followed(database: Database, make_worker, http_target) -> None:
    http_target.script("/moved", Reply(302, headers={"Location": "/elsewhere"}))
    seeded = seed(database, spec=http_spec(http_target.url("/moved")))
    settle(make_worker(), database, seeded.execution_ids)
    assert _only_attempt(database, seeded.execution_id)["error"]["status_code"] == 302
    assert http_target.received("/elsewhere") == []


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "169.254.169.254"])
def test_ssrf_guard_refuses_private_targets(
    database: Database, make_worker, http_target, host: str
) -> None:
    url = f"http://{host}:{http_target.port}/private"
    seeded = seed(database, spec=http_spec(url), policy=retry_policy(max_attempts=3))

    settle(make_worker(allow_private_targets=False), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    error = _only_attempt(database, seeded.execution_id)["error"]
    assert error["type"] == "CONNECTION_ERROR"
    assert "not an allowed delivery target" in error["message"]
    assert "127.0.0.1" not in error["message"].replace(f"'{host}'", "")  # no resolved address
    assert http_target.received() == []


def test_late_result_of_a_reclaimed_execution_changes_nothing(
    database: Database, make_worker, http_target
) -> None:
    http_target.script("/late", Reply(200, delay=1.0), Reply(200, body="second"))
    seeded = seed(
        database, spec=http_spec(http_target.url("/late")), policy=retry_policy(max_attempts=3)
    )
    slow, fast = make_worker(worker_id="slow"), make_worker(worker_id="fast")
    assert slow.run_once() == 1
    # What the stuck reclaimer does to an expired lease, while "slow" is still delivering.
    database.run(
        "UPDATE executions SET status = 'RETRYING', worker_id = NULL, run_at = now() "
        "WHERE execution_id = :id AND status = 'RUNNING'",
        id=seeded.execution_id,
    )
    assert fast.run_once() == 1
    fast.drain(10)
    slow.drain(10)

    row = execution(database, seeded.execution_id)
    assert (row["status"], row["worker_id"], row["attempt_count"]) == ("SUCCESS", "fast", 2)
    assert row["output"]["body"] == "second"
    assert [a["attempt_number"] for a in attempts(database, seeded.execution_id)] == [2]
    assert len(http_target.received("/late")) == 2


def test_blocking_dispatch_sends_one_request_on_its_own_loop(http_target) -> None:
    """The Dispatcher protocol's blocking form (the worker uses dispatch_async)."""
    http_target.script("/busy", Reply(429, headers={"Retry-After": "7"}), Reply(200, body="ok"))
    dispatcher = HttpDispatcher(allow_private=True, clock=lambda: datetime.now(UTC))
    request = DeliveryRequest(
        execution_id="exec_blocking", attempt=1, spec=http_spec(http_target.url("/busy"))
    )

    first = dispatcher.dispatch(request)
    second = dispatcher.dispatch(request)  # a fresh loop and connection each time

    assert not first.ok and first.error is not None and first.error["status_code"] == 429
    assert first.retry_after_ms == 7000
    assert second.ok and second.output == {"status_code": 200, "body": "ok"}
    assert [r.headers["idempotency-key"] for r in http_target.received("/busy")] == [
        "exec_blocking",
        "exec_blocking",
    ]
