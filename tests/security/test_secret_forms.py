"""Secrets never come back in any encoding.

A hostile HTTP target echoes the secret it received raw, JSON-escaped, percent-encoded in
upper and lower case, with ``+`` for spaces and in base64 (alone, inside a Basic
credential and URL-safe), once in a 200 body (the output) and once in a 500 body placed so
that the error message's cut falls inside the secret. Redis and Kafka endpoints put the
secret where their client libraries quote it back in an error. Then every API response,
log record and database row is scanned for every form: none may remain.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.delivery import ERROR_MESSAGE_LIMIT
from chalicelib.worker import Worker
from tests.security.test_secrets_scenario import (
    RecordingApi,
    deliver,
    every_row,
    log_lines,
    recording_api,  # noqa: F401 (a fixture used below)
    worker,  # noqa: F401 (a fixture used below)
)
from tests.support.served import HttpTarget
from tests.support.served import Reply as TargetReply


def forms(secret: str) -> list[str]:
    """Every encoding the target echoes (and the scan looks for)."""
    percent = quote(secret, safe="")
    raw = secret.encode()
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        percent,
        percent.lower(),
        quote_plus(secret, safe=""),
        quote_plus(secret, safe="").lower(),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
    ]


def base64_embeddings(secret: str) -> list[str]:
    """The secret inside larger base64 texts, at each of the three byte alignments."""
    raw = secret.encode()
    return [base64.b64encode(prefix + raw + b"!").decode() for prefix in (b"u:", b"us:", b"usr:")]


def leaks(haystacks: list[str], secret: str) -> list[str]:
    """Every haystack holding a form, or a telling piece of one (the base64 middle)."""
    needles = [*forms(secret), *(b64[8:-8] for b64 in base64_embeddings(secret))]
    return [f"{n!r} in {h[:300]}" for h in haystacks for n in needles if n in h]


def http_endpoint(api: RecordingApi, name: str, url: str) -> None:
    spec = {
        "url": url,
        "method": "POST",
        "headers": {"Authorization": "Bearer {{secret.pw}}"},
        "body_template": {"x": "{{input.user_id}}"},
        "expected_status_codes": [200],
    }
    body = {"name": name, "type": "HTTP", "spec": spec, "retry_policy": {"max_attempts": 1}}
    api.call("POST", "/endpoints", body, expect=201)


def broken_transport_endpoints(api: RecordingApi, database: Database) -> None:
    """Secrets where redis-py and kafka-python quote them back (a malformed port).

    Such a target is refused when written (a secret in a host or port would be a name sent
    to DNS), so the rows are written as they could have been stored before that rule."""
    redis_spec = {
        "redis_url": "redis://127.0.0.1:{{secret.pw}}/0",
        "stream": "s",
        "fields_template": {"a": "{{input.user_id}}"},
    }
    kafka_spec = {
        "bootstrap_servers": "127.0.0.1:{{secret.pw}}",
        "topic": "t",
        "value_template": {"a": "{{input.user_id}}"},
    }
    address = {"REDIS_STREAM": "redis_url", "KAFKA": "bootstrap_servers"}
    for name, kind, spec in (("rs", "REDIS_STREAM", redis_spec), ("kf", "KAFKA", kafka_spec)):
        body = {"name": name, "type": kind, "spec": spec, "retry_policy": {"max_attempts": 1}}
        refused = api._api.post("/endpoints", body)  # not recorded: it names no value
        assert refused.status == 422, refused.body
        stored = {**spec, address[kind]: "127.0.0.1:1" if kind == "KAFKA" else "redis://h/0"}
        api.call("POST", "/endpoints", {**body, "spec": stored}, expect=201)
        database.execute(
            "UPDATE endpoints SET spec = CAST(:spec AS JSONB) WHERE name = :name",
            spec=json.dumps(spec),
            name=name,
        )


def echoed(secret: str) -> str:
    return " | ".join([*forms(secret), *base64_embeddings(secret)])


def test_no_form_of_a_secret_survives_in_attempts_logs_or_rows(
    recording_api: RecordingApi,  # noqa: F811
    worker: Worker,  # noqa: F811
    http_target: HttpTarget,
    database: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    api = recording_api
    secret = f'pw"q\\uote ä😀 {uuid.uuid4().hex}'
    api.call("POST", "/secrets", {"name": "pw", "value": secret}, expect=201)
    http_endpoint(api, "echo-ok", http_target.url("/ok"))
    http_endpoint(api, "echo-fail", http_target.url("/fail"))
    broken_transport_endpoints(api, database)
    http_target.script("/ok", TargetReply(200, body=f"got {echoed(secret)}"))
    # The 500 body starts so that the message's cut falls 5 characters into the secret.
    prefix = "unexpected status 500 (expected one of [200]): "
    pad = "x" * (ERROR_MESSAGE_LIMIT - len(prefix) - 5)
    http_target.script("/fail", TargetReply(500, body=pad + echoed(secret)))

    outcomes: dict[str, dict[str, Any]] = {}
    for endpoint in ("echo-ok", "echo-fail", "rs", "kf"):
        outcomes[endpoint] = deliver(api, worker, endpoint, endpoint)
    assert [o["status"] for o in outcomes.values()] == ["SUCCESS", "FAILED", "FAILED", "FAILED"]
    attempts = {
        name: api.call("GET", f"/executions/{o['execution_id']}/attempts")["items"][0]
        for name, o in outcomes.items()
    }
    assert "[REDACTED]" in attempts["echo-ok"]["output"]["body"]
    message = attempts["echo-fail"]["error"]["message"]
    assert message.startswith(prefix + pad) and message.endswith("[REDACTED]"), message
    for name in ("rs", "kf"):
        assert "[REDACTED]" in attempts[name]["error"]["message"], attempts[name]
    # http.server reads header bytes as latin-1: undo that to compare with what was sent.
    sent = [
        str(r.headers.get("authorization")).encode("latin-1").decode()
        for r in http_target.received()
    ]
    assert sent == [f"Bearer {secret}"] * 2

    haystacks = api.dumped() + log_lines(caplog.records) + every_row(database)
    assert leaks(haystacks, secret) == []
