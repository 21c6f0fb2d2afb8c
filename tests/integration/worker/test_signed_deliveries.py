"""Signed deliveries against real targets: an HTTP server, a Kafka-
protocol broker and Redis, each verified by the independent ``standardwebhooks`` package,
which rejects the same delivery once its body, timestamp or id is tampered with."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from chalicelib.db.connection import Database
from chalicelib.wiring.worker import build_worker
from tests.integration.worker.test_delivery_semantics import running
from tests.integration.worker.test_streams import kafka_spec, redis_spec
from tests.support.seed.worker import (
    BOX,
    attempts,
    create_secret,
    execution,
    http_spec,
    logs,
    retry_policy,
    seed,
    statuses,
)
from tests.support.served import HttpTarget, Reply, kafka_messages
from tests.support.waiting import wait_for
from tests.support.worker_runs import settings, settle

KEY = bytes(range(1, 33))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
OLD_KEY = bytes(range(200, 232))
OLD_SECRET = "whsec_" + base64.b64encode(OLD_KEY).decode()
#: Every spelling of the keys that must never be recorded or logged.
KEY_FORMS = [
    form
    for key in (KEY, OLD_KEY)
    for form in (
        base64.b64encode(key).decode().rstrip("="),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
        key.hex(),
    )
]


def signing_secret(database: Database, value: str = SECRET, name: str = "hooks") -> str:
    create_secret(database, name, value)
    return name


def rotate(database: Database, name: str, previous: str, ago: timedelta) -> None:
    """What PUT /secrets/{name} leaves behind: the replaced key and when it was replaced."""
    database.run(
        "UPDATE secrets SET previous_encrypted_value = :blob, rotated_at = :at WHERE name = :name",
        name=name,
        blob=BOX.encrypt(name, previous),
        at=datetime.now(UTC) - ago,
    )


def tampered(body: bytes, headers: dict[str, str]) -> list[tuple[bytes, dict[str, str]]]:
    stamp = str(int(headers["webhook-timestamp"]) - 1)
    return [
        (body.replace(b"u_1", b"u_2"), headers),
        (body, {**headers, "webhook-id": headers["webhook-id"] + "x"}),
        (body, {**headers, "webhook-timestamp": stamp}),
    ]


def assert_rejected_after_tampering(secret: str, body: bytes, headers: dict[str, str]) -> None:
    for data, changed in tampered(body, headers):
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(data, changed)


def readme_receiver(secret: str) -> dict[str, Any]:
    """The receiver docs/how-to/verify-signatures.md shows, run as written (with ``secret``
    as its key)."""
    page = Path(__file__).parents[3] / "docs" / "how-to" / "verify-signatures.md"
    readme = page.read_text(encoding="utf-8")
    start = readme.index("```python\nimport json\n\nfrom standardwebhooks")
    code = readme[start + len("```python\n") : readme.index("```\n", start + 10)]
    namespace: dict[str, Any] = {}
    exec(code.replace('"whsec_..."', repr(secret)), namespace)  # noqa: S102 - our own docs
    return namespace


def assert_no_key(*recorded: object) -> None:
    text = json.dumps(recorded, default=str)
    for form in KEY_FORMS:
        assert form not in text


# -- HTTP ---------------------------------------------------------------------------------


def test_http_delivery_is_signed_and_tampering_is_rejected(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    spec = http_spec(http_target.url("/hook"), signing_secret=signing_secret(database))
    seeded = seed(database, spec=spec, inputs=[{"user_id": "u_1"}])
    before = int(time.time())

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"
    [request] = http_target.received("/hook")
    headers = request.headers
    assert headers["webhook-id"] == seeded.execution_id
    assert before <= int(headers["webhook-timestamp"]) <= int(request.at)
    assert Webhook(SECRET).verify(request.body, headers) == {"user_id": "u_1"}
    assert readme_receiver(SECRET)["on_http"](request.body, headers) == {"user_id": "u_1"}
    assert_rejected_after_tampering(SECRET, request.body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD_SECRET).verify(request.body, headers)


def test_every_attempt_carries_the_same_id_and_its_own_signature(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/flaky", Reply(500), Reply(200))
    spec = http_spec(http_target.url("/flaky"), signing_secret=signing_secret(database))
    seeded = seed(database, spec=spec, policy=retry_policy(max_attempts=2))

    settle(make_worker(), database, seeded.execution_ids)

    received = http_target.received("/flaky")
    assert len(received) == 2
    assert {r.headers["webhook-id"] for r in received} == {seeded.execution_id}
    for request in received:
        Webhook(SECRET).verify(request.body, request.headers)


def test_two_workers_sign_every_delivery_with_its_execution_id(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    name = signing_secret(database)
    rotate(database, name, OLD_SECRET, ago=timedelta(minutes=1))
    seeded = seed(database, spec=http_spec(http_target.url("/two"), signing_secret=name), count=40)

    with running(make_worker(), make_worker()):
        wait_for(
            lambda: statuses(database, seeded.execution_ids),
            "40 delivered",
            until=lambda counts: counts.get("SUCCESS") == 40,
        )

    received = http_target.received("/two")
    assert sorted(r.headers["webhook-id"] for r in received) == sorted(seeded.execution_ids)
    for request in received:
        Webhook(SECRET).verify(request.body, request.headers)
        Webhook(OLD_SECRET).verify(request.body, request.headers)


def test_a_bodiless_request_signs_the_empty_body(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    spec = http_spec(http_target.url("/get"), method="GET", signing_secret=signing_secret(database))
    del spec["body_template"]
    seeded = seed(database, spec=spec)

    settle(make_worker(), database, seeded.execution_ids)

    [request] = http_target.received("/get")
    assert request.body == b""
    Webhook(SECRET).verify(b"", request.headers, json_parse=False)
    # The README's receiver, as written, verifies it too (it used to parse the empty body
    # as JSON and fail), and still refuses a tampered or added body.
    on_http = readme_receiver(SECRET)["on_http"]
    assert on_http(request.body, request.headers) is None
    for body, headers in tampered(request.body, request.headers)[1:]:  # [0] edits the body
        with pytest.raises(WebhookVerificationError):
            on_http(body, headers)
    with pytest.raises(WebhookVerificationError):
        on_http(b"{}", request.headers)  # a body where none was signed


def test_spec_headers_cannot_forge_the_signature_headers(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    forged = {"Webhook-Signature": "v1,forged", "webhook-id": "forged"}
    spec = http_spec(http_target.url("/f"), headers=forged, signing_secret=signing_secret(database))
    seeded = seed(database, spec=spec, inputs=[{"user_id": "u_1"}])

    settle(make_worker(), database, seeded.execution_ids)

    [request] = http_target.received("/f")
    assert request.headers["webhook-id"] == seeded.execution_id
    assert "forged" not in request.headers["webhook-signature"]
    Webhook(SECRET).verify(request.body, request.headers)


def test_during_a_rotation_both_keys_sign(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    name = signing_secret(database)
    rotate(database, name, OLD_SECRET, ago=timedelta(hours=1))
    seeded = seed(database, spec=http_spec(http_target.url("/r"), signing_secret=name))

    settle(make_worker(), database, seeded.execution_ids)

    [request] = http_target.received("/r")
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(SECRET).verify(request.body, request.headers)
    Webhook(OLD_SECRET).verify(request.body, request.headers)


def test_after_the_rotation_window_only_the_new_key_signs(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    name = signing_secret(database)
    rotate(database, name, OLD_SECRET, ago=timedelta(seconds=120))
    seeded = seed(database, spec=http_spec(http_target.url("/w"), signing_secret=name))

    settle(make_worker(signing_rotation_window_sec=60), database, seeded.execution_ids)

    [request] = http_target.received("/w")
    assert " " not in request.headers["webhook-signature"]
    Webhook(SECRET).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD_SECRET).verify(request.body, request.headers)


def test_a_secret_that_cannot_sign_fails_the_attempt_without_showing_it(
    database: Database, make_worker, http_target: HttpTarget, caplog
) -> None:
    value = "sk-live-0123456789abcdef-not-a-key"
    name = signing_secret(database, value, name="not_a_key")
    spec = http_spec(http_target.url("/n"), signing_secret=name)
    seeded = seed(database, spec=spec, policy=retry_policy(max_attempts=3))

    with caplog.at_level("DEBUG"):
        settle(make_worker(), database, seeded.execution_ids)

    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["error"]["type"] == "TEMPLATE_RESOLUTION_FAILED"
    assert "'not_a_key' cannot sign" in attempt["error"]["message"]
    assert "whsec_" in attempt["error"]["message"]
    assert http_target.received() == []
    stored = json.dumps([attempt, logs(database, seeded.execution_id)], default=str)
    assert value not in stored and value not in caplog.text


def test_a_missing_signing_secret_fails_the_attempt(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    seeded = seed(database, spec=http_spec(http_target.url("/m"), signing_secret="gone"))
    settle(make_worker(), database, seeded.execution_ids)
    [attempt] = attempts(database, seeded.execution_id)
    assert attempt["error"] == {
        "type": "TEMPLATE_RESOLUTION_FAILED",
        "message": "Signing secret 'gone' does not exist.",
    }


def test_a_target_echoing_the_key_back_never_gets_it_recorded_or_logged(
    database: Database, make_worker, http_target: HttpTarget, caplog
) -> None:
    name = signing_secret(database)
    rotate(database, name, OLD_SECRET, ago=timedelta(minutes=5))
    echo = " ".join([SECRET, OLD_SECRET, *KEY_FORMS, json.dumps({"k": SECRET})])
    http_target.script("/echo", Reply(500, body=f"bad key: {echo}"), Reply(200, body=echo))
    spec = http_spec(http_target.url("/echo"), signing_secret=name)
    seeded = seed(database, spec=spec, policy=retry_policy(max_attempts=2))

    with caplog.at_level("DEBUG"):
        settle(make_worker(), database, seeded.execution_ids)

    row = execution(database, seeded.execution_id)
    assert row["status"] == "SUCCESS"
    recorded = [row, attempts(database, seeded.execution_id), logs(database, seeded.execution_id)]
    assert_no_key(recorded, caplog.text)
    assert "whsec_" not in json.dumps(recorded, default=str)
    assert "[REDACTED]" in json.dumps(recorded, default=str)


class CountingDatabase:
    """The test database, counting the transactions the worker runs by name."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.names: Counter[str] = Counter()

    def transaction(self, work: Any, *, name: str, **kwargs: Any) -> Any:
        self.names[name] += 1
        return self._db.transaction(work, name=name, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._db, attr)


def test_signing_secrets_come_from_the_secret_cache_with_no_query_per_delivery(
    database: Database, http_target: HttpTarget
) -> None:
    create_secret(database, "api_key", "sk-live-template-secret")
    spec = http_spec(
        http_target.url("/many"),
        headers={"Authorization": "Bearer {{secret.api_key}}"},
        signing_secret=signing_secret(database),
    )
    seeded = seed(database, spec=spec, count=20)
    counting = CountingDatabase(database)
    worker = build_worker(
        db=counting,  # type: ignore[arg-type]
        settings=settings(),
        secret_box=lambda: BOX,
    )
    try:
        settle(worker, database, seeded.execution_ids)
    finally:
        worker.stop()
        worker.drain(5)
        worker.close()

    received = http_target.received("/many")
    assert len(received) == 20
    for request in received:
        Webhook(SECRET).verify(request.body, request.headers)
    # Both secrets in one read, then from the cache: one query, not one per delivery.
    assert counting.names["secret_values"] == 1


# -- Kafka and Redis Streams ------------------------------------------------------------------


def test_kafka_record_headers_are_signed_over_the_value(
    database: Database, make_worker, kafka_bootstrap: str
) -> None:

    topic = "signed-" + uuid.uuid4().hex[:8]
    spec = kafka_spec(kafka_bootstrap, topic, signing_secret=signing_secret(database))
    seeded = seed(
        database,
        spec=spec,
        endpoint_type="KAFKA",
        inputs=[{"order_id": "u_1", "amount": 3, "event_type": "created"}],
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"
    (message,) = kafka_messages(kafka_bootstrap, topic)
    headers = {k: v.decode() for k, v in message.headers}
    assert headers["webhook-id"] == seeded.execution_id
    assert Webhook(SECRET).verify(message.value, headers) == {"order_id": "u_1", "amount": 3}
    assert readme_receiver(SECRET)["on_kafka"](message) == {"order_id": "u_1", "amount": 3}
    assert_rejected_after_tampering(SECRET, message.value, headers)


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def test_redis_entry_fields_are_signed(
    database: Database, make_worker, redis_url: str, rds: redis.Redis
) -> None:
    stream = "signed-" + uuid.uuid4().hex[:8]
    spec = redis_spec(redis_url, stream, signing_secret=signing_secret(database))
    seeded = seed(
        database, spec=spec, endpoint_type="REDIS_STREAM", inputs=[{"user_id": "u_1", "n": 7}]
    )

    settle(make_worker(), database, seeded.execution_ids)

    [(_, fields)] = rds.xrange(stream)
    assert fields["webhook-id"] == seeded.execution_id
    # The receiver's recipe (README): the entry's fields but the worker's own, as compact
    # JSON with sorted keys.
    own = {"execution_id", "attempt", "webhook-id", "webhook-timestamp", "webhook-signature"}
    payload = {k: v for k, v in fields.items() if k not in own}
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    assert Webhook(SECRET).verify(body, fields) == {"user_id": "u_1", "n": "7"}
    assert readme_receiver(SECRET)["on_stream_entry"](fields) == {"user_id": "u_1", "n": "7"}
    assert_rejected_after_tampering(SECRET, body, fields)
