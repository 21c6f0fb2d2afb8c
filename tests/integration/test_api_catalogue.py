"""Payload specs, configs and secrets through the API against real PostgreSQL."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient

SCHEMA = {
    "type": "object",
    "properties": {"user_id": {"type": "string"}, "order_id": {"type": "string"}},
    "required": ["user_id"],
}
SECRET_VALUE = "sk-live-abc123-very-secret-value"


def parse_ts(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def http_endpoint(name: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "type": "HTTP",
        "spec": {"url": "https://example.com/hook", "method": "POST"},
    }
    body.update(overrides)
    return body


# -- payload specs -------------------------------------------------------------------------


def test_payload_spec_lifecycle(api: ApiClient) -> None:
    created = api.post("/payload-specs", {"name": "welcome-input", "schema": SCHEMA})
    assert created.status == 201
    assert set(created.body) == {"name", "schema", "created_at", "updated_at"}
    assert created.body["schema"] == SCHEMA
    assert created.body["created_at"] == created.body["updated_at"]
    parse_ts(created.body["created_at"])

    got = api.get("/payload-specs/welcome-input")
    assert got.status == 200 and got.body == created.body

    new_schema = {**SCHEMA, "required": ["user_id", "order_id"]}
    updated = api.put("/payload-specs/welcome-input", {"schema": new_schema})
    assert updated.status == 200
    assert updated.body["schema"] == new_schema
    assert updated.body["created_at"] == created.body["created_at"]
    assert parse_ts(updated.body["updated_at"]) > parse_ts(created.body["updated_at"])

    listed = api.get("/payload-specs")
    assert listed.body == {"items": [updated.body], "cursor": None}

    deleted = api.delete("/payload-specs/welcome-input")
    assert deleted.status == 204 and deleted.body is None
    assert deleted.headers["x-request-id"].startswith("req_")
    missing = api.get("/payload-specs/welcome-input")
    assert missing.status == 404 and missing.error_code == "PAYLOAD_SPEC_NOT_FOUND"
    assert api.delete("/payload-specs/welcome-input").error_code == "PAYLOAD_SPEC_NOT_FOUND"
    put_missing = api.put("/payload-specs/welcome-input", {"schema": SCHEMA})
    assert put_missing.status == 404 and put_missing.error_code == "PAYLOAD_SPEC_NOT_FOUND"


def test_payload_spec_duplicate_name_is_409(api: ApiClient) -> None:
    assert api.post("/payload-specs", {"name": "dup", "schema": SCHEMA}).status == 201
    again = api.post("/payload-specs", {"name": "dup", "schema": {}})
    assert again.status == 409 and again.error_code == "CONFLICT"
    assert "dup" in again.body["error"]["message"]


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "no-such-type"}, "no-such-type"),
        ({"type": "object", "properties": {"a": {"minLength": -1}}}, "properties/a/minLength"),
        ({"required": "user_id"}, "required"),
        ({"$schema": "https://example.com/not-a-meta-schema", "type": "object"}, "$schema"),
        ({"$schema": 7}, "$schema"),
    ],
)
def test_invalid_json_schema_is_422_with_the_reason(
    api: ApiClient, schema: dict[str, Any], reason: str
) -> None:
    reply = api.post("/payload-specs", {"name": "bad", "schema": schema})
    assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA"
    assert reason in reply.body["error"]["message"]
    assert api.get("/payload-specs/bad").status == 404


def test_declared_older_draft_is_checked_against_its_own_meta_schema(api: ApiClient) -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert api.post("/payload-specs", {"name": "d7", "schema": draft7}).status == 201
    bad = {"$schema": "http://json-schema.org/draft-07/schema#", "type": 12}
    reply = api.put("/payload-specs/d7", {"schema": bad})
    assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "x"}, "Missing required field(s): schema"),
        ({"schema": SCHEMA}, "Missing required field(s): name"),
        ({"name": "x", "schema": SCHEMA, "extra": 1}, "Unknown field(s): extra"),
        ({"name": "x", "schema": [1]}, "'schema' must be an object"),
        ({"name": "x", "schema": True}, "'schema' must be an object"),
        ({"name": 5, "schema": SCHEMA}, "'name' must be a string"),
        ({"name": "Has Spaces", "schema": SCHEMA}, "Field 'name' must be"),
        ({"name": "a" * 101, "schema": SCHEMA}, "Field 'name' must be"),
    ],
)
def test_payload_spec_malformed_bodies_are_400(
    api: ApiClient, body: dict[str, Any], fragment: str
) -> None:
    reply = api.post("/payload-specs", body)
    assert reply.status == 400 and reply.error_code == "INVALID_REQUEST"
    assert fragment in reply.body["error"]["message"]


def test_put_body_name_must_match_the_url(api: ApiClient) -> None:
    api.post("/payload-specs", {"name": "one", "schema": SCHEMA})
    same = api.put("/payload-specs/one", {"name": "one", "schema": SCHEMA})
    assert same.status == 200
    other = api.put("/payload-specs/one", {"name": "two", "schema": SCHEMA})
    assert other.status == 400 and other.error_code == "INVALID_REQUEST"


def test_payload_spec_referenced_by_endpoints_cannot_be_deleted(api: ApiClient) -> None:
    api.post("/payload-specs", {"name": "input", "schema": SCHEMA})
    for name in ("ep-a", "ep-b"):
        assert api.post("/endpoints", http_endpoint(name, payload_spec="input")).status == 201
    reply = api.delete("/payload-specs/input")
    assert reply.status == 409 and reply.error_code == "CONFLICT"
    assert "ep-a, ep-b" in reply.body["error"]["message"]
    assert api.get("/payload-specs/input").status == 200
    api.delete("/endpoints/ep-a")
    api.put("/endpoints/ep-b", http_endpoint("ep-b"))
    assert api.delete("/payload-specs/input").status == 204


# -- configs -------------------------------------------------------------------------------


def test_config_lifecycle(api: ApiClient) -> None:
    values = {"redis_url": "redis://r:6379", "stream_name": "s", "max_stream_length": 100000}
    created = api.post("/configs", {"name": "notification-stream", "values": values})
    assert created.status == 201
    assert set(created.body) == {"name", "values", "created_at", "updated_at"}
    assert created.body["values"] == values
    assert api.get("/configs/notification-stream").body == created.body

    updated = api.put("/configs/notification-stream", {"values": {"only": ["a", 1, None]}})
    assert updated.status == 200 and updated.body["values"] == {"only": ["a", 1, None]}
    assert parse_ts(updated.body["updated_at"]) > parse_ts(created.body["updated_at"])

    assert api.delete("/configs/notification-stream").status == 204
    missing = api.get("/configs/notification-stream")
    assert missing.status == 404 and missing.error_code == "CONFIG_NOT_FOUND"
    assert api.put("/configs/nope", {"values": {}}).error_code == "CONFIG_NOT_FOUND"
    assert api.delete("/configs/nope").error_code == "CONFIG_NOT_FOUND"


def test_config_errors(api: ApiClient) -> None:
    assert api.post("/configs", {"name": "c", "values": {}}).status == 201
    assert api.post("/configs", {"name": "c", "values": {}}).error_code == "CONFLICT"
    for body in ({"name": "d", "values": [1]}, {"name": "d"}, {"name": "d", "values": {}, "x": 1}):
        reply = api.post("/configs", body)
        assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), body


def test_config_referenced_by_endpoints_cannot_be_deleted(api: ApiClient) -> None:
    api.post("/configs", {"name": "svc", "values": {"base": "https://example.com"}})
    spec = {"url": "{{config.base}}/x", "method": "GET"}
    api.post("/endpoints", http_endpoint("uses-svc", config="svc", spec=spec))
    reply = api.delete("/configs/svc")
    assert reply.status == 409 and reply.error_code == "CONFLICT"
    assert "uses-svc" in reply.body["error"]["message"]
    api.delete("/endpoints/uses-svc")
    assert api.delete("/configs/svc").status == 204


# -- secrets -------------------------------------------------------------------------------


def test_secret_lifecycle_never_returns_or_stores_the_plaintext(
    api: ApiClient, database: Database
) -> None:
    replies = [api.post("/secrets", {"name": "email_api_key", "value": SECRET_VALUE})]
    assert replies[0].status == 201
    assert set(replies[0].body) == {"name", "created_at", "updated_at"}
    replies.append(api.get("/secrets/email_api_key"))
    replies.append(api.get("/secrets"))
    rotated_value = SECRET_VALUE + "-rotated"
    replies.append(api.put("/secrets/email_api_key", {"value": rotated_value}))
    assert replies[-1].status == 200
    assert parse_ts(replies[-1].body["updated_at"]) > parse_ts(replies[0].body["updated_at"])
    replies.append(api.post("/secrets", {"name": "email_api_key", "value": SECRET_VALUE}))
    assert replies[-1].error_code == "CONFLICT"
    for reply in replies:
        raw = json.dumps(reply.body) + json.dumps(reply.headers)
        assert SECRET_VALUE not in raw and "sk-live" not in raw

    stored = database.run("SELECT encrypted_value FROM secrets WHERE name = 'email_api_key'")
    blob = bytes(stored[0]["encrypted_value"])
    assert b"sk-live" not in blob and rotated_value.encode() not in blob

    from chalicelib.wiring.process import ProcessRoot

    keyring = ProcessRoot().reading_box()  # the keys as the process reads them
    assert keyring.decrypt("email_api_key", blob) == rotated_value


def test_secret_errors(api: ApiClient) -> None:
    assert api.get("/secrets/nope").error_code == "SECRET_NOT_FOUND"
    assert api.put("/secrets/nope", {"value": "v"}).error_code == "SECRET_NOT_FOUND"
    assert api.delete("/secrets/nope").error_code == "SECRET_NOT_FOUND"
    bad_bodies = [
        {"name": "s", "value": ""},
        {"name": "s", "value": 42},
        {"name": "s", "value": "x" * (64 * 1024 + 1)},
        {"name": "s"},
        {"name": "s", "value": "v", "extra": True},
        {"name": "S!", "value": "v"},
    ]
    for body in bad_bodies:
        reply = api.post("/secrets", body)
        assert (reply.status, reply.error_code) == (400, "INVALID_REQUEST"), body
    assert api.post("/secrets", {"name": "s", "value": "x" * (64 * 1024)}).status == 201


def test_secret_without_encryption_key_is_a_clear_500(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TE_SECRET_ENCRYPTION_KEY")
    api.restart()
    reply = api.post("/secrets", {"name": "k", "value": SECRET_VALUE})
    assert reply.status == 500 and reply.error_code == "INTERNAL_ERROR"
    assert "TE_SECRET_ENCRYPTION_KEY" in reply.body["error"]["message"]
    assert SECRET_VALUE not in json.dumps(reply.body)
    assert api.get("/secrets/k").status == 404


def test_secret_referenced_by_an_endpoint_spec_cannot_be_deleted(api: ApiClient) -> None:
    api.post("/secrets", {"name": "token", "value": "t1"})
    api.post("/secrets", {"name": "token_2", "value": "t2"})
    spec = {
        "url": "https://example.com",
        "method": "POST",
        "headers": {"Authorization": "Bearer {{ secret.token_2 }}"},
    }
    assert api.post("/endpoints", http_endpoint("uses-token-2", spec=spec)).status == 201
    # "secret.token" is a prefix of "secret.token_2" in the spec text: not a reference.
    assert api.delete("/secrets/token").status == 204
    reply = api.delete("/secrets/token_2")
    assert reply.status == 409 and reply.error_code == "CONFLICT"
    assert "uses-token-2" in reply.body["error"]["message"]
    api.delete("/endpoints/uses-token-2")
    assert api.delete("/secrets/token_2").status == 204


def test_secret_value_never_reaches_the_logs(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.post("/secrets", {"name": "logged", "value": SECRET_VALUE})
    api.put("/secrets/logged", {"value": SECRET_VALUE + "-2"})
    api.post("/secrets", {"name": "logged", "value": SECRET_VALUE})
    api.post("/secrets", {"name": "Bad Name", "value": SECRET_VALUE})
    api.delete("/secrets/logged")
    events = [getattr(r, "event", None) for r in caplog.records]
    assert {"secret_created", "secret_rotated", "secret_deleted"} <= set(events)
    for record in caplog.records:
        assert "sk-live" not in record.getMessage()
        assert "sk-live" not in json.dumps(record.__dict__, default=str)
