"""Kafka and Redis Stream deliveries against a real broker and a real Redis server."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator

import pytest
import redis

from chalicelib.db.connection import Database
from tests.support.seed.worker import (
    attempts,
    create_config,
    execution,
    retry_policy,
    seed,
)
from tests.support.served import free_port, kafka_messages
from tests.support.worker_runs import settle


def kafka_spec(servers: str, topic: str, **extra: object) -> dict:
    spec = {
        "bootstrap_servers": servers,
        "topic": topic,
        "key_template": "{{input.order_id}}",
        "value_template": {"order_id": "{{input.order_id}}", "amount": "{{input.amount}}"},
        "headers": {"ce-type": "order.{{input.event_type}}", "ce-source": "task-executor"},
        "acks": "all",
        "timeout_ms": 5000,
    }
    spec.update(extra)
    return spec


def test_kafka_record_read_back_by_a_consumer(
    database: Database, make_worker, kafka_bootstrap: str
) -> None:

    topic = "orders-" + uuid.uuid4().hex[:8]
    create_config(database, "order-events", {"servers": kafka_bootstrap, "topic": topic})
    spec = kafka_spec("{{config.servers}}", "{{config.topic}}")
    seeded = seed(
        database,
        spec=spec,
        endpoint_type="KAFKA",
        config_ref="order-events",
        inputs=[{"order_id": "o-1", "amount": 12.5, "event_type": "created"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS"
    assert set(row["output"]) == {"partition", "offset"}
    (message,) = kafka_messages(kafka_bootstrap, topic)
    assert message.key == b"o-1"
    assert json.loads(message.value) == {"order_id": "o-1", "amount": 12.5}
    headers = dict(message.headers)
    assert headers["ce-type"] == b"order.created"
    assert headers["ce-source"] == b"task-executor"
    assert headers["X-Task-Executor-Execution-Id"] == seeded.execution_id.encode()
    assert headers["X-Task-Executor-Attempt"] == b"1"
    assert (message.partition, message.offset) == (
        row["output"]["partition"],
        row["output"]["offset"],
    )


def test_kafka_dead_broker_fails_within_timeout(database: Database, make_worker) -> None:
    spec = kafka_spec(f"127.0.0.1:{free_port()}", "t", timeout_ms=500)
    seeded = seed(
        database,
        spec=spec,
        endpoint_type="KAFKA",
        inputs=[{"order_id": "o", "amount": 1, "event_type": "x"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["error"]["type"] == "BROKER_ERROR"
    assert execution(database, seeded.execution_id)["status"] == "FAILED"


# -- Redis Streams --------------------------------------------------------------------------


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def redis_spec(url: str, stream: str, **extra: object) -> dict:
    spec = {
        "redis_url": url,
        "stream": stream,
        "fields_template": {"user_id": "{{input.user_id}}", "n": "{{input.n}}"},
        "max_len": None,
        "approximate_trimming": True,
        "timeout_ms": 2000,
    }
    spec.update(extra)
    return spec


def test_redis_entry_read_back_with_xrange(
    database: Database, make_worker, redis_url: str, rds: redis.Redis
) -> None:
    stream = "notifications-" + uuid.uuid4().hex[:8]
    seeded = seed(
        database,
        spec=redis_spec(redis_url, stream),
        endpoint_type="REDIS_STREAM",
        inputs=[{"user_id": "u_1", "n": 7}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    [(entry_id, fields)] = rds.xrange(stream)
    assert row["output"] == {"message_id": entry_id, "stream": stream}
    assert fields == {
        "user_id": "u_1",
        "n": "7",
        "execution_id": seeded.execution_id,
        "attempt": "1",
    }


def test_redis_maxlen_trimming(
    database: Database, make_worker, redis_url: str, rds: redis.Redis
) -> None:
    approx, exact = "approx-" + uuid.uuid4().hex[:8], "exact-" + uuid.uuid4().hex[:8]
    inputs = [{"user_id": f"u{i}", "n": i} for i in range(300)]
    create_config(database, "stream-cfg", {"max": 10})
    first = seed(
        database,
        spec=redis_spec(redis_url, approx, max_len="{{config.max}}"),
        endpoint_type="REDIS_STREAM",
        config_ref="stream-cfg",
        inputs=inputs,
    )
    second = seed(
        database,
        spec=redis_spec(redis_url, exact, max_len=5, approximate_trimming=False),
        endpoint_type="REDIS_STREAM",
        inputs=inputs[:20],
    )

    settle(make_worker(), database, first.execution_ids + second.execution_ids)

    # "~" trims whole radix-tree nodes (100 entries each by default): shorter, not exact.
    assert 10 <= rds.xlen(approx) < 300
    assert rds.xlen(exact) == 5


def test_redis_exactly_once_under_a_forced_retry(
    database: Database, make_worker, redis_url: str, rds: redis.Redis
) -> None:
    stream = "once-" + uuid.uuid4().hex[:8]
    seeded = seed(
        database,
        spec=redis_spec(redis_url, stream),
        endpoint_type="REDIS_STREAM",
        policy=retry_policy(max_attempts=3),
        inputs=[{"user_id": "u", "n": 1}],
    )
    worker = make_worker()
    settle(worker, database, seeded.execution_ids)
    # As if the finalize had been lost and the reclaimer had returned the execution.
    database.run(
        "UPDATE executions SET status = 'RETRYING', run_at = now(), worker_id = NULL "
        "WHERE execution_id = :id",
        id=seeded.execution_id,
    )

    settle(worker, database, seeded.execution_ids)

    assert rds.xlen(stream) == 1
    first, second = attempts(database, seeded.execution_id)
    assert second["attempt_number"] == 2
    assert first["output"]["message_id"] == second["output"]["message_id"]


def test_redis_connection_error(database: Database, make_worker) -> None:
    spec = redis_spec(f"redis://127.0.0.1:{free_port()}/0", "s", timeout_ms=500)
    seeded = seed(
        database, spec=spec, endpoint_type="REDIS_STREAM", inputs=[{"user_id": "u", "n": 1}]
    )
    settle(make_worker(), database, seeded.execution_ids)
    assert attempts(database, seeded.execution_id)[0]["error"]["type"] == "CONNECTION_ERROR"


def test_redis_timeout_when_the_server_never_answers(database: Database, make_worker) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel accepts connections; nobody ever replies
    try:
        port = silent.getsockname()[1]
        spec = redis_spec(f"redis://127.0.0.1:{port}/0", "s", timeout_ms=300)
        seeded = seed(
            database, spec=spec, endpoint_type="REDIS_STREAM", inputs=[{"user_id": "u", "n": 1}]
        )
        settle(make_worker(), database, seeded.execution_ids)
    finally:
        silent.close()
    error = attempts(database, seeded.execution_id)[0]["error"]
    assert error == {"type": "TIMEOUT", "message": "no reply within 300 ms"}


def test_redis_stream_error_on_a_key_of_another_type(
    database: Database, make_worker, redis_url: str, rds: redis.Redis
) -> None:
    key = "plain-" + uuid.uuid4().hex[:8]
    rds.set(key, "not a stream")
    seeded = seed(
        database,
        spec=redis_spec(redis_url, key),
        endpoint_type="REDIS_STREAM",
        inputs=[{"user_id": "u", "n": 1}],
    )
    settle(make_worker(), database, seeded.execution_ids)
    error = attempts(database, seeded.execution_id)[0]["error"]
    assert error["type"] == "STREAM_ERROR" and "WRONGTYPE" in error["message"]
