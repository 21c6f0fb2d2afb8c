"""A delivery has a bounded size, and nothing a target answers (or a stored spec holds) can
leave it RUNNING: real PostgreSQL, a real HTTP target, a real Redis and Kafka broker."""

from __future__ import annotations

import uuid

import pytest
import redis

from chalicelib.db.connection import Database
from chalicelib.domain.delivery import MAX_REQUEST_BYTES
from tests.integration.worker.test_streams import kafka_spec, redis_spec
from tests.support.seed.worker import attempts, execution, http_spec, logs, retry_policy, seed
from tests.support.served import HttpTarget, Reply
from tests.support.worker_runs import settle

#: A value a quarter of the size limit: one copy fits, five do not.
QUARTER = "b" * (MAX_REQUEST_BYTES // 4)
FAN_OUT = ["{{input.b}}"] * 5


def _attempt_errors(database: Database, execution_id: str) -> list[dict]:
    return [row["error"] for row in attempts(database, execution_id)]


# -- the rendered request has a size limit ---------------------------------------------------


def test_http_body_past_the_limit_fails_request_too_large_without_retry(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/big"), body_template={"copies": FAN_OUT}),
        policy=retry_policy(max_attempts=3),
        inputs=[{"b": QUARTER}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    [error] = _attempt_errors(database, seeded.execution_id)  # one attempt: no retry
    assert error["type"] == "REQUEST_TOO_LARGE"
    assert str(MAX_REQUEST_BYTES) in error["message"]
    assert http_target.received("/big") == []  # nothing was sent


def test_http_headers_count_towards_the_limit(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    headers = {f"X-Copy-{i}": "{{input.b}}" for i in range(5)}
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/hdr"), headers=headers, body_template=None),
        inputs=[{"b": QUARTER}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert _attempt_errors(database, seeded.execution_id)[0]["type"] == "REQUEST_TOO_LARGE"
    assert http_target.received("/hdr") == []


def test_a_request_under_the_limit_is_sent_whole(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """The limit leaves room for the largest input the API accepts, sent once."""
    big = "c" * (1024 * 1024)
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/fits"), body_template={"b": "{{input.b}}"}),
        inputs=[{"b": big}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"
    [request] = http_target.received("/fits")
    assert request.json() == {"b": big}


def test_kafka_record_past_the_limit_fails_request_too_large(
    database: Database, make_worker, kafka_bootstrap: str
) -> None:
    topic = "big-" + uuid.uuid4().hex[:8]
    seeded = seed(
        database,
        spec=kafka_spec(kafka_bootstrap, topic, value_template={"copies": FAN_OUT}),
        endpoint_type="KAFKA",
        policy=retry_policy(max_attempts=3),
        inputs=[{"b": QUARTER, "order_id": "o-1", "event_type": "x"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    [error] = _attempt_errors(database, seeded.execution_id)
    assert error["type"] == "REQUEST_TOO_LARGE"


def test_redis_fields_past_the_limit_fail_request_too_large(
    database: Database, make_worker, redis_url: str
) -> None:
    stream = "big-" + uuid.uuid4().hex[:8]
    fields = {f"f{i}": "{{input.b}}" for i in range(5)}
    seeded = seed(
        database,
        spec=redis_spec(redis_url, stream, fields_template=fields),
        endpoint_type="REDIS_STREAM",
        policy=retry_policy(max_attempts=3),
        inputs=[{"b": QUARTER}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    [error] = _attempt_errors(database, seeded.execution_id)
    assert error["type"] == "REQUEST_TOO_LARGE"
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.exists(stream) == 0
    finally:
        client.close()


def test_a_kafka_record_under_the_limit_is_sent(
    database: Database, make_worker, kafka_bootstrap: str
) -> None:
    """A 2 MiB record is within the rendered-request limit but past kafka-python's default
    ``max_request_size`` (1 MiB): the producer takes what the limit allows, instead of
    failing a ``BROKER_ERROR`` that every retry repeats."""
    topic = "big-" + uuid.uuid4().hex[:8]
    seeded = seed(
        database,
        spec=kafka_spec(kafka_bootstrap, topic, value_template={"b": "{{input.b}}"}),
        endpoint_type="KAFKA",
        policy=retry_policy(max_attempts=3),
        inputs=[{"b": "k" * (2 * 1024 * 1024), "order_id": "o-1", "event_type": "x"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS", _attempt_errors(database, seeded.execution_id)
    assert set(row["output"]) == {"partition", "offset"}


# -- nothing a target answers leaves a delivery RUNNING --------------------------------------


@pytest.mark.parametrize(
    "retry_after",
    ["\u00b2", "1" * 5000, "Mon, 01 Jan 99999999999999999999 00:00:00 GMT"],
    ids=["superscript-two", "five-thousand-digits", "year-past-c-long"],
)
def test_malformed_retry_after_is_ignored(
    database: Database, make_worker, http_target: HttpTarget, retry_after: str
) -> None:
    http_target.script("/busy", Reply(503, body="busy", headers={"Retry-After": retry_after}))
    seeded = seed(database, spec=http_spec(http_target.url("/busy")))

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    [error] = _attempt_errors(database, seeded.execution_id)
    assert error["type"] == "HTTP_ERROR" and error["status_code"] == 503


def test_an_exception_in_a_delivery_is_a_recorded_attempt_and_retried(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """A stored spec the dispatcher cannot use (``timeout_ms`` rendered from input as text)
    raises inside the delivery: the attempt is recorded ``INTERNAL_ERROR`` and the retry
    policy decides, instead of the execution staying RUNNING until its lease expires."""
    seeded = seed(
        database,
        spec=http_spec(http_target.url("/t"), timeout_ms="{{input.t}}"),
        policy=retry_policy(max_attempts=2),
        inputs=[{"t": "soon", "user_id": "u"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "FAILED" and row["attempt_count"] == 2
    errors = _attempt_errors(database, seeded.execution_id)
    assert [e["type"] for e in errors] == ["INTERNAL_ERROR", "INTERNAL_ERROR"]
    assert "ValueError" in errors[0]["message"]
    assert "lease" not in " ".join(e["message"] for e in errors)


@pytest.mark.parametrize("query", ["?foo=bar", "?encoding=nope"], ids=["unknown", "codec"])
def test_unknown_redis_url_parameter_fails_the_attempt(
    database: Database, make_worker, redis_url: str, query: str
) -> None:
    """A row stored before such URLs were refused at write time (or a URL rendered from a
    config): refused at delivery, without a retry (every retry would fail the same way)."""
    stream = "q-" + uuid.uuid4().hex[:8]
    seeded = seed(
        database,
        spec=redis_spec(f"{redis_url}{query}", stream),
        endpoint_type="REDIS_STREAM",
        policy=retry_policy(max_attempts=3),
        inputs=[{"user_id": "u", "n": 1}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    [error] = _attempt_errors(database, seeded.execution_id)
    assert error["type"] == "CONNECTION_ERROR"
    assert error["message"].startswith("invalid redis_url")


# -- any bytes in an answer are recordable ---------------------------------------------------


def test_a_2xx_with_nul_and_binary_bytes_is_a_success(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/bin", Reply(200, body=b"ok\x00\xff\xfe\xed\xa0\x80end"))
    seeded = seed(database, spec=http_spec(http_target.url("/bin")))

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS"
    body = row["output"]["body"]
    assert body.startswith("ok\ufffd") and body.endswith("end") and "\x00" not in body
    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["status"] == "SUCCESS" and attempt["output"]["body"] == body


def test_an_error_answer_with_a_nul_is_recorded_as_itself(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """The body also reaches the error message (JSONB) and the log line (TEXT)."""
    http_target.script("/err", Reply(500, body=b"bad\x00answer"))
    seeded = seed(database, spec=http_spec(http_target.url("/err")))

    settle(make_worker(), database, seeded.execution_ids)

    [error] = _attempt_errors(database, seeded.execution_id)
    assert error["type"] == "HTTP_ERROR" and error["status_code"] == 500
    assert "bad\ufffdanswer" in error["message"]
    assert "bad\ufffdanswer" in logs(database, seeded.execution_id)[-1]["message"]
