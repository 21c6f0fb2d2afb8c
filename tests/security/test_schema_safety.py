"""Payload specs cannot reach outside themselves or freeze the API.

A ``$ref`` resolves only inside the schema (nothing is fetched, no file is read); an
unresolvable one is refused at creation and, if already stored, is a 422 at job creation,
never a 500. Patterns run on RE2: the classic catastrophic-backtracking patterns answer at
once, and patterns RE2 cannot run are refused at creation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.served import HttpTarget, Reply

EVIL = "^(a+)+$"
EVIL_INPUT = "a" * 28 + "!"  # 19 s on Python's re; 31 characters took 151 s


def _rows(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


def _job(api: ApiClient, job_input: Any, key: str = "k") -> Any:
    return api.post(
        "/jobs",
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": key, "input": job_input},
    )


def _bad_refs(http_target: HttpTarget, secret_file: Path) -> list[str]:
    return [
        http_target.url("/schema.json"),
        http_target.url("/missing.json"),
        secret_file.as_uri(),
        "#/$defs/missing",
        "other.json#/x",
    ]


def test_refs_outside_the_schema_are_refused_at_creation_and_nothing_is_fetched(
    api: ApiClient, database: Database, http_target: HttpTarget, tmp_path: Path
) -> None:
    secret_file = tmp_path / "passwd"
    secret_file.write_text('{"type": "string", "description": "root:x:0:0 FILE-CONTENT"}')
    http_target.script("/schema.json", Reply(body=json.dumps({"type": "string"})))
    for ref in _bad_refs(http_target, secret_file):
        schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
        reply = api.post("/payload-specs", {"name": "p", "schema": schema})
        assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA", (ref, reply.body)
        message = reply.body["error"]["message"]
        assert repr(ref) in message and "properties/a" in message
        assert "FILE-CONTENT" not in json.dumps(reply.body)
    assert _rows(database, "payload_specs") == 0
    assert http_target.received() == []


def test_update_with_an_outside_ref_is_refused_and_keeps_the_old_schema(
    api: ApiClient, http_target: HttpTarget
) -> None:
    assert api.post("/payload-specs", {"name": "p", "schema": {"type": "object"}}).status == 201
    reply = api.put("/payload-specs/p", {"schema": {"$ref": http_target.url("/s.json")}})
    assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA"
    assert api.get("/payload-specs/p").body["schema"] == {"type": "object"}
    assert http_target.received() == []


def test_local_refs_and_embedded_ids_still_work(api: ApiClient) -> None:
    schema = {
        "$id": "https://schemas.example.com/order",
        "type": "object",
        "properties": {
            "user": {"$ref": "#/$defs/user"},
            "qty": {"$ref": "qty"},
            "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
        "$defs": {
            "user": {"type": "string", "minLength": 2},
            "qty": {"$id": "qty", "type": "integer"},
        },
    }
    assert api.post("/payload-specs", {"name": "p", "schema": schema}).status == 201
    register_endpoint(api, "e", "http://example.com/", payload_spec="p")
    assert _job(api, {"user": "ab", "qty": 2, "meta": {"type": "object"}}).status == 201
    reply = _job(api, {"user": "a", "qty": "x"}, key="k2")
    assert reply.status == 422 and reply.error_code == "INPUT_VALIDATION_FAILED"
    assert "$.qty" in reply.body["error"]["message"] and "$.user" in reply.body["error"]["message"]


def test_a_stored_schema_with_an_outside_ref_is_a_422_at_job_creation(
    api: ApiClient, database: Database, http_target: HttpTarget
) -> None:
    """Specs written before refs were checked at creation still never fetch, nor 500."""
    assert api.post("/payload-specs", {"name": "p", "schema": {"type": "object"}}).status == 201
    register_endpoint(api, "e", "http://example.com/", payload_spec="p")
    stored = {"properties": {"a": {"$ref": http_target.url("/s.json")}}}
    database.run(
        "UPDATE payload_specs SET schema_json = CAST(:s AS JSONB) WHERE name = 'p'",
        s=json.dumps(stored),
    )
    reply = _job(api, {"a": 1})
    assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA", reply.body
    assert _rows(database, "jobs") == 0
    assert http_target.received() == []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "(a)\\1"},
        {"type": "string", "pattern": "^(?=a)a$"},
        {"type": "object", "patternProperties": {"(?<!x)y": {}}},
    ],
)
def test_patterns_the_linear_engine_cannot_run_are_refused_at_creation(
    api: ApiClient, database: Database, schema: dict[str, Any]
) -> None:
    reply = api.post("/payload-specs", {"name": "p", "schema": schema})
    assert reply.status == 422 and reply.error_code == "INVALID_SCHEMA", reply.body
    assert "RE2" in reply.body["error"]["message"]
    assert _rows(database, "payload_specs") == 0


@pytest.mark.parametrize(
    ("schema", "job_input"),
    [
        ({"type": "object", "properties": {"a": {"pattern": EVIL}}}, {"a": EVIL_INPUT}),
        (
            {"type": "object", "patternProperties": {EVIL: {"type": "string"}}},
            {EVIL_INPUT: 1, "aaaa": 1},
        ),
        (
            {"type": "object", "patternProperties": {EVIL: True}, "additionalProperties": False},
            {EVIL_INPUT: 1},
        ),
        (
            {"type": "object", "patternProperties": {EVIL: True}, "unevaluatedProperties": False},
            {EVIL_INPUT: 1},
        ),
    ],
)
def test_catastrophic_patterns_answer_at_once(
    api: ApiClient, schema: dict[str, Any], job_input: dict[str, Any]
) -> None:
    """On Python's re each of these takes about 19 s; on RE2 they are microseconds.

    The time bound itself is checked over HTTP in tests/acceptance (concurrent requests);
    here the point is that they complete with the right answer at all.
    """
    assert api.post("/payload-specs", {"name": "p", "schema": schema}).status == 201
    register_endpoint(api, "e", "http://example.com/", payload_spec="p")
    reply = _job(api, job_input)
    assert reply.status == 422 and reply.error_code == "INPUT_VALIDATION_FAILED", reply.body
    assert _job(api, {"a": "aaaa", "aaaa": "x"}, key="ok").status == 201
