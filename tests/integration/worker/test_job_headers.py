"""A job's own headers and W3C trace context, from POST /jobs (and batches) through the real
API to real targets on loopback: an HTTP server, a Kafka-protocol broker, a Redis server."""

from __future__ import annotations

import json
import uuid
from typing import Any

import redis

from chalicelib.db.connection import Database
from tests.integration.worker.test_payloads import http, only
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed.worker import attempts, execution, logs
from tests.support.served import HttpTarget, Reply, kafka_messages
from tests.support.worker_runs import settle

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"
TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
RETRY_ONCE = {"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 0, "max_delay_ms": 0}


def run_job(
    api: ApiClient,
    database: Database,
    worker: Any,
    endpoint: str,
    *,
    trace_headers: dict[str, str] | None = None,
    **extra: Any,
) -> str:
    """Create an IMMEDIATE job (``trace_headers``: on the request) and deliver it."""
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": uuid.uuid4().hex}
    reply = api.post("/jobs", {**body, **extra}, headers=trace_headers)
    assert reply.status == 201, reply.body
    execution_id = str(reply.body["execution"]["execution_id"])
    settle(worker, database, [execution_id])
    return execution_id


def fields_of(traceparent: str) -> tuple[str, str, str, str]:
    version, trace_id, parent_id, flags = traceparent.split("-")
    return version, trace_id, parent_id, flags


def test_http_job_headers_override_the_endpoints_in_any_case(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    static = {"X-Tenant": "endpoint", "Accept": "application/json", "Content-Type": "text/x-a"}
    register_endpoint(api, "tenant", spec=http(http_target, "tenant", headers=static))
    headers = {"x-tenant": "acme", "X-Request-Source": "batch-7", "content-type": "text/x-b"}

    run_job(api, database, make_worker(), "tenant", input={"a": 1}, headers=headers)

    request = only(http_target, "tenant")
    assert request.headers["x-tenant"] == "acme"
    assert request.headers["x-request-source"] == "batch-7"
    assert request.headers["accept"] == "application/json"
    assert request.headers["content-type"] == "text/x-b"
    assert request.json() == {"a": 1}
    assert request.headers["x-task-executor-attempt"] == "1"


def test_a_credential_header_never_reaches_the_attempts_or_logs(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    token = "tok-" + uuid.uuid4().hex
    register_endpoint(api, "echo", spec=http(http_target, "echo"), retry_policy=RETRY_ONCE)
    http_target.script("/echo", Reply(500, body=f"denied: Bearer {token}"), Reply(200, token))

    execution_id = run_job(
        api, database, make_worker(), "echo", headers={"Authorization": f"Bearer {token}"}
    )

    assert [r.headers["authorization"] for r in http_target.received("/echo")] == [
        f"Bearer {token}"
    ] * 2
    recorded = json.dumps(
        [attempts(database, execution_id), logs(database, execution_id)], default=str
    )
    recorded += json.dumps(execution(database, execution_id), default=str)
    assert token not in recorded
    assert "[REDACTED]" in recorded
    job = api.get(f"/jobs/{execution(database, execution_id)['job_id']}").body
    assert token not in json.dumps(job)


def test_traceparent_header_reaches_every_attempt_with_a_new_parent_id(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "traced", spec=http(http_target, "traced"), retry_policy=RETRY_ONCE)
    http_target.script("/traced", Reply(503, body="again"), Reply(200, body="ok"))

    execution_id = run_job(
        api,
        database,
        make_worker(),
        "traced",
        trace_headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
    )

    assert execution(database, execution_id)["status"] == "SUCCESS"
    sent = http_target.received("/traced")
    assert len(sent) == 2
    parents = set()
    for request in sent:
        version, trace_id, parent_id, flags = fields_of(request.headers["traceparent"])
        assert (version, trace_id, flags) == ("00", TRACE, "01")
        assert parent_id not in ("00f067aa0ba902b7", "0" * 16)
        parents.add(parent_id)
        assert request.headers["tracestate"] == TRACESTATE
    assert len(parents) == 2


def test_a_malformed_traceparent_is_ignored_never_a_5xx(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "untraced", spec=http(http_target, "untraced"))
    worker = make_worker()
    for value in (
        "garbage",
        f"00-{'0' * 32}-00f067aa0ba902b7-01",
        f"ff-{TRACE}-00f067aa0ba902b7-01",
    ):
        run_job(
            api,
            database,
            worker,
            "untraced",
            trace_headers={"traceparent": value, "tracestate": "a=b"},
        )
        run_job(api, database, worker, "untraced", headers={"traceparent": value})
    for request in http_target.received("/untraced"):
        assert "traceparent" not in request.headers
        assert "tracestate" not in request.headers


def test_a_batch_keeps_the_requests_trace_unless_an_item_has_its_own(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "batched", spec=http(http_target, "batched"))
    own = f"00-{'a' * 32}-{'b' * 16}-00"
    items = [
        {
            "endpoint": "batched",
            "trigger": "IMMEDIATE",
            "idempotency_key": "one",
            "input": {"i": 1},
        },
        {
            "endpoint": "batched",
            "trigger": "IMMEDIATE",
            "idempotency_key": "two",
            "input": {"i": 2},
            "headers": {"traceparent": own, "X-Item": "2"},
        },
    ]
    reply = api.post("/jobs/batch", {"jobs": items}, headers={"traceparent": TRACEPARENT})
    assert reply.status == 200, reply.body
    ids = [item["job"]["execution"]["execution_id"] for item in reply.body["items"]]
    settle(make_worker(), database, ids)

    by_item = {r.json()["i"]: r.headers for r in http_target.received("/batched")}
    assert fields_of(by_item[1]["traceparent"])[1] == TRACE
    assert fields_of(by_item[2]["traceparent"])[1] == "a" * 32
    assert fields_of(by_item[2]["traceparent"])[3] == "00"
    assert by_item[2]["x-item"] == "2"
    assert "x-item" not in by_item[1]


def test_refused_headers_through_the_api(api: ApiClient) -> None:
    register_endpoint(api, "refusing")
    cases = {
        "Idempotency-Key": "Header 'Idempotency-Key' in 'headers' is set by the service",
        "webhook-signature": "Header 'webhook-signature' in 'headers' is set by the service",
        "X-Bad Name": "Header 'X-Bad Name' in 'headers' is not a valid header name",
    }
    for name, message in cases.items():
        body = {"endpoint": "refusing", "trigger": "IMMEDIATE", "idempotency_key": name}
        reply = api.post("/jobs", {**body, "headers": {name: "v"}})
        assert reply.status == 400, reply.body
        assert reply.body["error"]["code"] == "INVALID_REQUEST"
        assert message in reply.body["error"]["message"]
        item = api.post("/jobs/batch", {"jobs": [{**body, "headers": {name: "v"}}]})
        assert message in json.dumps(item.body)
    reply = api.post(
        "/jobs",
        {
            "endpoint": "refusing",
            "trigger": "IMMEDIATE",
            "idempotency_key": "crlf",
            "headers": {"X-A": "1\r\nX-B: 2"},
        },
    )
    assert reply.status == 400
    assert (
        "Header 'X-A' in 'headers' has a value with CR, LF or NUL" in reply.body["error"]["message"]
    )


def test_kafka_record_carries_the_job_headers_and_trace(
    api: ApiClient, database: Database, make_worker: Any, kafka_bootstrap: str
) -> None:

    topic = "headers-" + uuid.uuid4().hex[:8]
    spec = {
        "bootstrap_servers": kafka_bootstrap,
        "topic": topic,
        "timeout_ms": 5000,
        "headers": {"X-Tenant": "endpoint", "ce-source": "te"},
    }
    register_endpoint(api, "kafka-headers", endpoint_type="KAFKA", spec=spec)
    headers = {"x-tenant": "acme", "traceparent": TRACEPARENT, "tracestate": TRACESTATE}

    execution_id = run_job(api, database, make_worker(), "kafka-headers", headers=headers)

    assert execution(database, execution_id)["status"] == "SUCCESS"
    (message,) = kafka_messages(kafka_bootstrap, topic)
    record = dict(message.headers)
    assert record["x-tenant"] == b"acme"
    assert "X-Tenant" not in record
    assert record["ce-source"] == b"te"
    _, trace_id, parent_id, _ = fields_of(record["traceparent"].decode())
    assert (trace_id, parent_id != "00f067aa0ba902b7") == (TRACE, True)
    assert record["tracestate"] == TRACESTATE.encode()
    assert record["X-Task-Executor-Execution-Id"] == execution_id.encode()


def test_redis_entry_carries_header_fields_and_the_trace(
    api: ApiClient, database: Database, make_worker: Any, redis_url: str
) -> None:
    stream = "headers-" + uuid.uuid4().hex[:8]
    spec = {"redis_url": redis_url, "stream": stream}
    register_endpoint(api, "stream-headers", endpoint_type="REDIS_STREAM", spec=spec)
    headers = {"X-Tenant": "acme", "traceparent": TRACEPARENT}

    execution_id = run_job(api, database, make_worker(), "stream-headers", headers=headers)

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        [(_, fields)] = client.xrange(stream)
    finally:
        client.close()
    assert set(fields) == {"input", "execution_id", "attempt", "header:X-Tenant", "traceparent"}
    assert fields["header:X-Tenant"] == "acme"
    _, trace_id, parent_id, flags = fields_of(fields["traceparent"])
    assert (trace_id, flags) == (TRACE, "01")
    assert parent_id != "00f067aa0ba902b7"
    assert fields["execution_id"] == execution_id


def test_a_cron_jobs_new_version_keeps_its_headers_and_trace(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "ticking")
    body = {
        "endpoint": "ticking",
        "trigger": "CRON",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "headers": {"X-Tenant": "acme", "traceparent": TRACEPARENT},
    }
    created = api.post("/jobs", body)
    assert created.status == 201, created.body
    assert "headers" not in created.body  # never shown back: they may carry credentials

    replaced = api.put(f"/jobs/{created.body['job_id']}", {"cron": "0 10 * * *"})
    assert replaced.status == 200, replaced.body

    [row] = database.run(
        "SELECT headers, traceparent, tracestate FROM jobs WHERE job_id = :id",
        id=replaced.body["job_id"],
    )
    assert (row["headers"], row["traceparent"], row["tracestate"]) == (
        {"X-Tenant": "acme"},
        TRACEPARENT,
        None,
    )
