"""What an endpoint sends without a template, or with a template that is one placeholder:
endpoints and jobs made through the real API, delivered by the real worker to real targets
on loopback (an HTTP server, a Kafka-protocol broker, a Redis server)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import redis

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed.worker import attempts, execution
from tests.support.served import HttpTarget, Received, Reply, kafka_messages
from tests.support.worker_runs import settle

INPUT = {"order": {"id": 7, "items": ["a", "b"]}, "n": 1.5, "note": "{{secret.x}}"}


def http(target: HttpTarget, name: str, **extra: Any) -> dict[str, Any]:
    target.script(f"/{name}", Reply(200, body="ok"))
    return {"url": target.url(f"/{name}"), "method": "POST", **extra}


def run_job(api: ApiClient, database: Database, worker: Any, endpoint: str, **extra: Any) -> str:
    """Create an IMMEDIATE job and deliver it; its execution id."""
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": uuid.uuid4().hex}
    reply = api.post("/jobs", {**body, **extra})
    assert reply.status == 201, reply.body
    execution_id = str(reply.body["execution"]["execution_id"])
    settle(worker, database, [execution_id])
    return execution_id


def only(target: HttpTarget, name: str) -> Received:
    [request] = target.received(f"/{name}")
    return request


def test_http_without_a_template_sends_the_input_as_a_json_body(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "plain", spec=http(http_target, "plain"))
    typed = {"Content-Type": "application/vnd.orders+json"}
    register_endpoint(api, "typed", spec=http(http_target, "typed", headers=typed))
    worker = make_worker()

    run_job(api, database, worker, "plain", input=INPUT)
    run_job(api, database, worker, "typed", input=INPUT)

    request = only(http_target, "plain")
    assert request.json() == INPUT  # as is: input text is never expanded
    assert request.headers["content-type"] == "application/json"
    assert int(request.headers["content-length"]) == len(request.body) > 0
    request = only(http_target, "typed")
    assert request.json() == INPUT
    assert request.headers["content-type"] == "application/vnd.orders+json"


def test_a_job_without_input_sends_no_body_and_a_get_never_does(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "no-input", spec=http(http_target, "no-input"))
    register_endpoint(api, "get", spec=http(http_target, "get", method="GET"))
    worker = make_worker()

    run_job(api, database, worker, "no-input")
    run_job(api, database, worker, "get", input=INPUT)

    for name in ("no-input", "get"):
        request = only(http_target, name)
        assert request.body == b"", name
        assert "content-type" not in request.headers, name


def test_one_placeholder_stands_for_a_whole_json_value(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    templates: dict[str, Any] = {
        "whole": "{{input}}",
        "spaced": "{{ input }}",
        "part": "{{input.order}}",
        "inside": {"data": "{{input.order}}", "n": "{{input.n}}", "all": "{{input}}"},
    }
    for name, template in templates.items():
        register_endpoint(api, name, spec=http(http_target, name, body_template=template))
    worker = make_worker()

    for name in templates:
        run_job(api, database, worker, name, input=INPUT)

    assert only(http_target, "whole").json() == INPUT
    assert only(http_target, "spaced").json() == INPUT
    assert only(http_target, "part").json() == INPUT["order"]
    inside = only(http_target, "inside").json()
    assert inside == {"data": INPUT["order"], "n": 1.5, "all": INPUT}


def test_a_callback_endpoint_without_a_body_template_receives_the_report(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "hook", spec=http(http_target, "hook", body_template={"k": 1}))
    register_endpoint(api, "on-done", spec=http(http_target, "on-done"))
    worker = make_worker()

    execution_id = run_job(api, database, worker, "hook", input=INPUT, on_success="on-done")
    [callback] = database.run(
        "SELECT j.job_id, e.execution_id FROM jobs j JOIN executions e USING (job_id)"
        " WHERE j.parent_execution_id = :id",
        id=execution_id,
    )
    settle(worker, database, [callback["execution_id"]])

    report = only(http_target, "on-done").json()
    assert report["execution_id"] == execution_id
    assert (report["status"], report["endpoint"], report["attempt_count"]) == (
        "SUCCESS",
        "hook",
        1,
    )
    assert report["output"] == {"status_code": 200, "body": "ok"}
    assert report["job_id"] == execution(database, execution_id)["job_id"]


def test_kafka_without_a_template_sends_the_input_as_the_json_value(
    api: ApiClient, database: Database, make_worker: Any, kafka_bootstrap: str
) -> None:

    topic = "payloads-" + uuid.uuid4().hex[:8]
    spec = {"bootstrap_servers": kafka_bootstrap, "topic": topic, "timeout_ms": 5000}
    register_endpoint(api, "kafka-plain", endpoint_type="KAFKA", spec=spec)
    register_endpoint(
        api,
        "kafka-part",
        endpoint_type="KAFKA",
        spec={**spec, "value_template": "{{input.order.id}}"},
    )
    register_endpoint(
        api, "kafka-text", endpoint_type="KAFKA", spec={**spec, "value_template": "{{input.note}}"}
    )
    worker = make_worker()

    names = ("kafka-plain", "kafka-part", "kafka-text")
    ids = [run_job(api, database, worker, name, input=INPUT) for name in names]

    assert [execution(database, i)["status"] for i in ids] == ["SUCCESS"] * 3
    values = [message.value for message in kafka_messages(kafka_bootstrap, topic, 3)]
    # JSON values (raw text would not parse), in any order: partitions may reorder them.
    decoded = sorted((json.loads(value) for value in values), key=json.dumps)
    assert decoded == sorted([INPUT, 7, "{{secret.x}}"], key=json.dumps)


def test_redis_without_a_template_sends_the_input_as_one_field(
    api: ApiClient, database: Database, make_worker: Any, redis_url: str
) -> None:
    stream = "payloads-" + uuid.uuid4().hex[:8]
    register_endpoint(
        api, "stream", endpoint_type="REDIS_STREAM", spec={"redis_url": redis_url, "stream": stream}
    )

    execution_id = run_job(api, database, make_worker(), "stream", input=INPUT)

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        [(_, fields)] = client.xrange(stream)
    finally:
        client.close()
    assert set(fields) == {"input", "execution_id", "attempt"}
    assert json.loads(fields["input"]) == INPUT
    assert fields["execution_id"] == execution_id


def test_an_endpoint_stored_with_an_undeliverable_url_fails_clearly_without_retry(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    """Rows written before the API checked targets keep failing as they did, once each."""
    policy = '{"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 0}'
    for name, url in (("legacy-text", "not a url"), ("legacy-ftp", "ftp://127.0.0.1/x")):
        database.run(
            "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) VALUES "
            "(:name, 'HTTP', CAST(:spec AS JSONB), CAST(:policy AS JSONB))",
            name=name,
            spec=json.dumps({"url": url, "method": "POST"}),
            policy=policy,
        )
    worker = make_worker()

    for name in ("legacy-text", "legacy-ftp"):
        execution_id = run_job(api, database, worker, name, input=INPUT)
        assert execution(database, execution_id)["status"] == "FAILED"
        [attempt] = attempts(database, execution_id)
        assert attempt["error"]["type"] == "TEMPLATE_RESOLUTION_FAILED"
        assert "url" in attempt["error"]["message"]
