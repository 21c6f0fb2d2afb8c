"""/endpoints through the API against real PostgreSQL: the spec's examples, references,
templates, defaults, replacement and dependent-delete conflicts."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database, Transaction
from chalicelib.domain.endpoints import EndpointDefinition, endpoint_snapshot, parse_endpoint
from chalicelib.errors import (
    ForeignKeyViolation,
    InvalidPayloadSpecRef,
    TaskExecutorError,
    TemplateResolutionFailed,
)
from chalicelib.services import catalogue as repo
from chalicelib.services.endpoints import check_references, register
from chalicelib.services.secrets import SecretService
from tests.support.api_client import ApiClient

HTTP_EXAMPLE: dict[str, Any] = {
    "name": "send-welcome-email",
    "type": "HTTP",
    "payload_spec": "send-welcome-email-input",
    "config": "email-service",
    "spec": {
        "url": "{{config.api_base_url}}/emails/welcome",
        "method": "POST",
        "headers": {
            "Authorization": "Bearer {{secret.email_api_key}}",
            "Content-Type": "application/json",
        },
        "body_template": {"user_id": "{{input.user_id}}", "sender": "{{config.sender}}"},
        "timeout_ms": 5000,
        "expected_status_codes": [200, 201, 202, 204],
    },
    "retry_policy": {
        "max_attempts": 3,
        "backoff": "exponential",
        "initial_delay_ms": 1000,
        "max_delay_ms": 30000,
    },
}
KAFKA_EXAMPLE: dict[str, Any] = {
    "name": "publish-order-event",
    "type": "KAFKA",
    "config": "order-events",
    "spec": {
        "bootstrap_servers": "{{config.bootstrap_servers}}",
        "topic": "{{config.topic}}",
        "key_template": "{{input.order_id}}",
        "value_template": {"event_type": "{{input.event_type}}", "order_id": "{{input.order_id}}"},
        "headers": {"ce-type": "order.{{input.event_type}}", "ce-source": "task-executor"},
        "acks": "all",
        "timeout_ms": 10000,
    },
    "retry_policy": {"max_attempts": 5, "initial_delay_ms": 500, "max_delay_ms": 15000},
}
REDIS_EXAMPLE: dict[str, Any] = {
    "name": "push-notification",
    "type": "REDIS_STREAM",
    "config": "notification-stream",
    "spec": {
        "redis_url": "{{config.redis_url}}",
        "stream": "{{config.stream_name}}",
        "fields_template": {"user_id": "{{input.user_id}}", "title": "{{input.title}}"},
        "max_len": "{{config.max_stream_length}}",
    },
}


@pytest.fixture
def setup_done(api: ApiClient) -> ApiClient:
    """The setup step of the specification's examples."""
    for name in ("send-welcome-email-input",):
        assert (
            api.post("/payload-specs", {"name": name, "schema": {"type": "object"}}).status == 201
        )
    configs = {
        "email-service": {"api_base_url": "https://api.myapp.com", "sender": "noreply@myapp.com"},
        "order-events": {"bootstrap_servers": "k1:9092", "topic": "order.events.v1"},
        "notification-stream": {
            "redis_url": "redis://r:6379",
            "stream_name": "n",
            "max_stream_length": 100000,
        },
    }
    for name, values in configs.items():
        assert api.post("/configs", {"name": name, "values": values}).status == 201
    assert api.post("/secrets", {"name": "email_api_key", "value": "sk-live"}).status == 201
    return api


def test_spec_examples_register_with_defaults_applied(setup_done: ApiClient) -> None:
    api = setup_done
    http = api.post("/endpoints", HTTP_EXAMPLE)
    assert http.status == 201, http.body
    assert set(http.body) == {
        "name",
        "type",
        "payload_spec",
        "config",
        "spec",
        "retry_policy",
        "created_at",
        "updated_at",
        "paused_at",
        "paused_reason",
        "held_until",
        "auto_pause_after_ms",
    }
    assert http.body["spec"] == HTTP_EXAMPLE["spec"]
    assert http.body["retry_policy"] == HTTP_EXAMPLE["retry_policy"]
    assert http.body["created_at"].endswith("Z")

    kafka = api.post("/endpoints", KAFKA_EXAMPLE)
    assert kafka.status == 201, kafka.body
    assert kafka.body["payload_spec"] is None
    assert kafka.body["retry_policy"]["backoff"] == "exponential"

    redis = api.post("/endpoints", REDIS_EXAMPLE)
    assert redis.status == 201, redis.body
    assert redis.body["spec"]["approximate_trimming"] is True
    assert redis.body["spec"]["timeout_ms"] == 3000
    assert redis.body["retry_policy"] == {
        "max_attempts": 1,
        "backoff": "exponential",
        "initial_delay_ms": 1000,
        "max_delay_ms": 60000,
    }

    minimal = api.post(
        "/endpoints",
        {"name": "bare", "type": "HTTP", "spec": {"url": "https://x.example", "method": "GET"}},
    )
    assert minimal.body["spec"]["timeout_ms"] == 30000
    assert minimal.body["spec"]["expected_status_codes"] == [200, 201, 202, 204]

    assert api.get("/endpoints/send-welcome-email").body == http.body
    listed = api.get("/endpoints?limit=2")
    assert [i["name"] for i in listed.body["items"]] == ["bare", "push-notification"]
    rest = api.get(f"/endpoints?limit=2&cursor={listed.body['cursor']}")
    assert [i["name"] for i in rest.body["items"]] == ["publish-order-event", "send-welcome-email"]


def test_duplicate_endpoint_is_409(setup_done: ApiClient) -> None:
    assert setup_done.post("/endpoints", HTTP_EXAMPLE).status == 201
    again = setup_done.post("/endpoints", HTTP_EXAMPLE)
    assert again.status == 409 and again.error_code == "CONFLICT"


def test_missing_references_are_422(setup_done: ApiClient) -> None:
    api = setup_done
    body = {**HTTP_EXAMPLE, "payload_spec": "nope"}
    reply = api.post("/endpoints", body)
    assert (reply.status, reply.error_code) == (422, "INVALID_PAYLOAD_SPEC_REF")
    body = {**HTTP_EXAMPLE, "config": "nope"}
    reply = api.post("/endpoints", body)
    assert (reply.status, reply.error_code) == (422, "INVALID_CONFIG_REF")
    spec = copy.deepcopy(HTTP_EXAMPLE["spec"])
    spec["headers"]["X-Other"] = "{{secret.unknown_secret}}"
    reply = api.post("/endpoints", {**HTTP_EXAMPLE, "spec": spec})
    assert (reply.status, reply.error_code) == (422, "TEMPLATE_RESOLUTION_FAILED")
    assert "unknown_secret" in reply.body["error"]["message"]
    assert api.get("/endpoints/send-welcome-email").status == 404


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", "https://example.com/{{input.user_id}}"),
        ("url", "{{env.HOME}}"),
        ("headers", {"X": "{{input.user_id}}"}),
        ("body_template", {"x": "{{vault.key}}"}),
    ],
)
def test_placeholders_a_field_does_not_support_are_422(
    setup_done: ApiClient, field: str, value: Any
) -> None:
    spec = {**HTTP_EXAMPLE["spec"], field: value}
    reply = setup_done.post("/endpoints", {**HTTP_EXAMPLE, "spec": spec})
    assert (reply.status, reply.error_code) == (422, "TEMPLATE_RESOLUTION_FAILED")
    assert f"spec.{field}" in reply.body["error"]["message"]


def test_config_placeholder_without_config_is_422(setup_done: ApiClient) -> None:
    body = {k: v for k, v in HTTP_EXAMPLE.items() if k != "config"}
    reply = setup_done.post("/endpoints", body)
    assert (reply.status, reply.error_code) == (422, "TEMPLATE_RESOLUTION_FAILED")
    assert "no 'config'" in reply.body["error"]["message"]


@pytest.mark.parametrize(
    "change",
    [
        {"type": "SMTP"},
        {"name": "Not_URL_Safe"},
        {"name": "trailing-"},
        {"spec": {"url": "https://x", "method": "FETCH"}},
        {"spec": {"url": "https://x"}},
        {"spec": {"url": "https://x", "method": "GET", "timeout_ms": 0}},
        {"spec": {"url": "https://x", "method": "GET", "timeout_ms": "5"}},
        {"spec": {"url": "https://x", "method": "GET", "expected_status_codes": []}},
        {"spec": {"url": "https://x", "method": "GET", "expected_status_codes": [99]}},
        {"spec": {"url": "https://x", "method": "GET", "headers": {"A": 1}}},
        {"spec": {"url": "https://x", "method": "GET", "body_template": "text"}},
        {"spec": {"url": "https://x", "method": "GET", "surprise": 1}},
        {"spec": "not an object"},
        {"retry_policy": {"max_attempts": 0}},
        {"retry_policy": {"max_attempts": 101}},
        {"retry_policy": {"max_attempts": True}},
        {"retry_policy": {"backoff": "random"}},
        {"retry_policy": {"initial_delay_ms": -1}},
        {"retry_policy": {"initial_delay_ms": 5000, "max_delay_ms": 1000}},
        {"retry_policy": {"jitter": True}},
        {"retry_policy": []},
        {"payload_spec": 3},
        {"unknown": 1},
    ],
)
def test_malformed_endpoints_are_400(api: ApiClient, change: dict[str, Any]) -> None:
    body = {"name": "e", "type": "HTTP", "spec": {"url": "https://x", "method": "GET"}}
    body.update(change)
    reply = api.post("/endpoints", body)
    assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), reply.body


def test_put_replaces_the_definition_and_jobs_keep_their_snapshot(
    setup_done: ApiClient, database: Database
) -> None:
    api = setup_done
    created = api.post("/endpoints", HTTP_EXAMPLE).body
    before = database.transaction(lambda tx: repo.get(tx, "endpoint", "send-welcome-email"))
    assert before is not None
    snapshot = endpoint_snapshot(before)
    assert snapshot == {
        "name": "send-welcome-email",
        "type": "HTTP",
        "spec": HTTP_EXAMPLE["spec"],
        "retry_policy": HTTP_EXAMPLE["retry_policy"],
        "config_ref": "email-service",
        "payload_spec_ref": "send-welcome-email-input",
    }

    replacement = {
        "type": "KAFKA",
        "spec": {"bootstrap_servers": "k:9092", "topic": "t", "value_template": {"a": 1}},
    }
    updated = api.put("/endpoints/send-welcome-email", replacement)
    assert updated.status == 200, updated.body
    assert updated.body["type"] == "KAFKA"
    assert updated.body["config"] is None and updated.body["payload_spec"] is None
    assert updated.body["retry_policy"]["max_attempts"] == 1
    assert updated.body["spec"]["acks"] == "all" and updated.body["spec"]["timeout_ms"] == 10000
    assert updated.body["created_at"] == created["created_at"]
    assert updated.body["updated_at"] > created["updated_at"]
    assert snapshot["type"] == "HTTP"  # a snapshot taken earlier is a copy, not a view

    assert api.put("/endpoints/nope", replacement).error_code == "ENDPOINT_NOT_FOUND"
    renamed = api.put("/endpoints/send-welcome-email", {**replacement, "name": "other"})
    assert renamed.error_code == "INVALID_REQUEST"
    bad_ref = api.put("/endpoints/send-welcome-email", {**replacement, "config": "nope"})
    assert bad_ref.error_code == "INVALID_CONFIG_REF"


def race_registration_against(
    database: Database, definition: EndpointDefinition, delete: Callable[[Transaction], None]
) -> BaseException | None:
    """Registration reads its references, then a concurrent ``delete`` commits, then the
    registration writes. Returns what the registration raised (None if it succeeded)."""
    references_read = threading.Event()
    deleted = threading.Event()
    first_attempt = [True]

    def work(tx: Transaction) -> Any:
        check_references(tx, definition)
        if first_attempt[0]:
            first_attempt[0] = False
            references_read.set()
            assert deleted.wait(30)
        return register(tx, definition)

    def deleter() -> None:
        assert references_read.wait(30)
        database.transaction(delete, name="test_delete")
        deleted.set()

    thread = threading.Thread(target=deleter)
    thread.start()
    try:
        database.transaction(work, name="test_register")
        error: BaseException | None = None
    except TaskExecutorError as exc:
        error = exc
    thread.join()
    return error


def test_secret_deleted_while_an_endpoint_registers_is_serialized(
    setup_done: ApiClient, database: Database
) -> None:
    spec = {"url": "https://x", "method": "GET", "headers": {"A": "{{secret.email_api_key}}"}}
    definition = parse_endpoint({"name": "racer", "type": "HTTP", "spec": spec})
    retries = database.stats.serialization_retries
    secrets = SecretService(database, box=lambda: SecretBox(None))
    error = race_registration_against(
        database, definition, lambda tx: secrets.delete_in(tx, "email_api_key")
    )
    assert isinstance(error, TemplateResolutionFailed)
    assert database.stats.serialization_retries > retries
    assert database.run("SELECT name FROM endpoints WHERE name = 'racer'") == []
    assert database.run("SELECT name FROM secrets WHERE name = 'email_api_key'") == []


def test_payload_spec_deleted_while_an_endpoint_registers_is_caught(
    setup_done: ApiClient, database: Database
) -> None:
    definition = parse_endpoint({**HTTP_EXAMPLE, "name": "racer"})

    def delete_spec(tx: Transaction) -> None:
        assert repo.endpoints_using(tx, "payload_spec", "send-welcome-email-input") == []
        repo.delete(tx, "payload_spec", "send-welcome-email-input")

    error = race_registration_against(database, definition, delete_spec)
    assert isinstance(error, InvalidPayloadSpecRef | ForeignKeyViolation)
    assert database.run("SELECT name FROM endpoints WHERE name = 'racer'") == []


# -- targets that can never be delivered to; payloads without a template -------------------


def _endpoint_rows(database: Database, name: str) -> int:
    return len(database.run("SELECT name FROM endpoints WHERE name = :name", name=name))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"url": "not a url", "method": "POST"}, "spec.url"),
        ({"url": "ftp://127.0.0.1/x", "method": "POST"}, "spec.url"),
        ({"url": "ftp://{{config.api_base_url}}/x", "method": "POST"}, "spec.url"),
    ],
)
def test_an_undeliverable_url_is_422_naming_the_field_and_nothing_is_written(
    setup_done: ApiClient, database: Database, spec: dict[str, Any], field: str
) -> None:
    body = {"name": "bad-target", "type": "HTTP", "config": "email-service", "spec": spec}
    reply = setup_done.post("/endpoints", body)
    assert (reply.status, reply.error_code) == (422, "INVALID_TARGET"), reply.body
    assert f"'{field}'" in reply.body["error"]["message"]
    assert setup_done.get("/endpoints/bad-target").status == 404
    assert _endpoint_rows(database, "bad-target") == 0


def test_an_undeliverable_redis_url_is_422(setup_done: ApiClient, database: Database) -> None:
    spec = {**REDIS_EXAMPLE["spec"], "redis_url": "http://r:6379"}
    reply = setup_done.post("/endpoints", {**REDIS_EXAMPLE, "spec": spec})
    assert (reply.status, reply.error_code) == (422, "INVALID_TARGET")
    assert "'spec.redis_url'" in reply.body["error"]["message"]
    assert _endpoint_rows(database, REDIS_EXAMPLE["name"]) == 0


def test_a_put_to_an_undeliverable_url_is_422_and_keeps_the_definition(
    setup_done: ApiClient,
) -> None:
    api = setup_done
    created = api.post("/endpoints", HTTP_EXAMPLE).body
    spec = {**HTTP_EXAMPLE["spec"], "url": "ftp://127.0.0.1/x"}
    reply = api.put("/endpoints/send-welcome-email", {**HTTP_EXAMPLE, "spec": spec})
    assert (reply.status, reply.error_code) == (422, "INVALID_TARGET")
    assert "'spec.url'" in reply.body["error"]["message"]
    assert api.get("/endpoints/send-welcome-email").body == created


def test_an_unknown_namespace_in_a_whole_value_template_is_422(setup_done: ApiClient) -> None:
    spec = {**HTTP_EXAMPLE["spec"], "body_template": "{{inptu.order}}"}
    reply = setup_done.post("/endpoints", {**HTTP_EXAMPLE, "spec": spec})
    assert (reply.status, reply.error_code) == (422, "TEMPLATE_RESOLUTION_FAILED")
    assert "spec.body_template" in reply.body["error"]["message"]
    assert setup_done.get("/endpoints/send-welcome-email").status == 404


def test_payload_templates_default_to_the_input_and_may_be_one_placeholder(
    api: ApiClient,
) -> None:
    def spec_of(name: str, endpoint_type: str, spec: dict[str, Any]) -> dict[str, Any]:
        reply = api.post("/endpoints", {"name": name, "type": endpoint_type, "spec": spec})
        assert reply.status == 201, reply.body
        assert api.get(f"/endpoints/{name}").body["spec"] == reply.body["spec"]
        return dict(reply.body["spec"])

    post = spec_of("post", "HTTP", {"url": "https://x.example", "method": "POST"})
    assert post["body_template"] == "{{input}}"
    get = spec_of("get", "HTTP", {"url": "https://x.example", "method": "GET"})
    assert "body_template" not in get
    whole = spec_of(
        "whole", "HTTP", {"url": "https://x", "method": "PUT", "body_template": "{{input.order}}"}
    )
    assert whole["body_template"] == "{{input.order}}"
    kafka = spec_of("kafka", "KAFKA", {"bootstrap_servers": "k:9092", "topic": "t"})
    assert kafka["value_template"] == "{{input}}"
    redis = spec_of("redis", "REDIS_STREAM", {"redis_url": "redis://r", "stream": "s"})
    assert redis["fields_template"] == {"input": "{{input}}"}


def test_an_endpoint_stored_with_an_undeliverable_url_stays_readable_and_usable(
    api: ApiClient, database: Database
) -> None:
    """Rows written before the check keep working as before: shown, and jobs created (their
    deliveries fail with TEMPLATE_RESOLUTION_FAILED, see the worker's tests)."""
    database.run(
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) VALUES "
        "('legacy', 'HTTP', CAST(:spec AS JSONB), NULL)",
        spec='{"url": "not a url", "method": "POST"}',
    )
    shown = api.get("/endpoints/legacy")
    assert shown.status == 200 and shown.body["spec"]["url"] == "not a url"
    job = {"endpoint": "legacy", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {}}
    assert api.post("/jobs", job).status == 201


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"redis_url": "redis://cache.example.com:6379/0?foo=bar", "stream": "s"}, "'foo'"),
        ({"redis_url": "redis://{{secret.pw}}:6379/0", "stream": "s"}, "{{secret.pw}}"),
        ({"bootstrap_servers": "{{secret.pw}}:9092", "topic": "t"}, "{{secret.*}}"),
    ],
    ids=["unknown-redis-parameter", "secret-redis-host", "secret-kafka-broker"],
)
def test_targets_that_would_fail_or_leak_are_refused_when_written(
    api: ApiClient, spec: dict[str, Any], named: str
) -> None:
    """An unknown redis_url parameter would reach redis-py's Connection(**kwargs) and fail
    every delivery; a secret in a host or port would be sent to DNS as a name."""
    assert api.post("/secrets", {"name": "pw", "value": "hunter2-hunter2"}).status == 201
    kind = "REDIS_STREAM" if "redis_url" in spec else "KAFKA"
    reply = api.post("/endpoints", {"name": "refused", "type": kind, "spec": spec})
    assert reply.status == 422, reply.body
    message = reply.body["error"]["message"]
    assert named in message, message
    if "foo" in named:
        assert reply.body["error"]["code"] == "INVALID_TARGET" and "allowed: db" in message
    assert api.get("/endpoints/refused").status == 404
