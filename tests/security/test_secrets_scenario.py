"""Secrets end to end: no value leaks; wrong keys fail clearly; rotation.

A whole scenario runs through the API and a real worker to a local HTTP target: create a
secret, an endpoint sending it in a header, deliver, rotate the secret (PUT), deliver again,
deliver to a target answering 500. The target echoes the secret in its bodies (a hostile
receiver), so redaction of stored responses is exercised too. Then every API response body
and header, every log record (all loggers at DEBUG, with their structured fields) and every
row of every table (except the ciphertext column) is scanned for both values: 0 hits. The
target itself must receive the current value in the header: that is what a secret is for.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.logs import JsonFormatter
from chalicelib.wiring.worker import worker_of
from chalicelib.worker import Worker
from tests.support.api_client import ApiClient, Reply
from tests.support.factories import endpoint_body
from tests.support.roots import Roots
from tests.support.served import HttpTarget
from tests.support.served import Reply as TargetReply
from tests.support.waiting import wait_for

KEY_B = base64.b64encode(bytes(range(100, 132))).decode()
SECRET = "partner_api_key"


class RecordingApi:
    """The test's ApiClient, keeping every reply for the final scan."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api
        self.replies: list[Reply] = []

    def restart(self) -> None:
        self._api.restart()

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        reply = self._api.request(method, path, body)
        self.replies.append(reply)
        assert reply.status == expect, (method, path, reply.status, reply.body)
        return reply.body

    def dumped(self) -> list[str]:
        return [json.dumps(r.body) + json.dumps(r.headers) for r in self.replies]


@pytest.fixture
def recording_api(api: ApiClient) -> RecordingApi:
    return RecordingApi(api)


@pytest.fixture
def worker(roots: Roots) -> Iterator[Worker]:
    built = worker_of(roots.current)
    yield built
    built.stop()
    built.drain(5)
    built.close()


def deliver(api: RecordingApi, worker: Worker, endpoint: str, user: str) -> dict[str, Any]:
    """POST an IMMEDIATE job, run the worker until its execution is terminal, return it."""
    job = api.call(
        "POST",
        "/jobs",
        {
            "endpoint": endpoint,
            "trigger": "IMMEDIATE",
            "idempotency_key": f"{endpoint}-{user}",
            "input": {"user_id": user},
        },
        expect=201,
    )
    page = api.call("GET", f"/jobs/{job['job_id']}/executions")
    execution_id = page["items"][0]["execution_id"]

    def delivered() -> dict[str, Any]:
        worker.run_once()
        worker.drain(10)
        return dict(api.call("GET", f"/executions/{execution_id}"))

    execution = wait_for(
        delivered, "a terminal status", until=lambda e: e["status"] in ("SUCCESS", "FAILED")
    )
    api.call("GET", f"/executions/{execution_id}/attempts")
    api.call("GET", f"/executions/{execution_id}/logs")
    api.call("GET", f"/jobs/{job['job_id']}")
    return execution


def register_endpoint(api: RecordingApi, name: str, url: str) -> None:
    spec = {
        "url": url,
        "method": "POST",
        "headers": {"X-Api-Key": "{{secret.partner_api_key}}", "Content-Type": "application/json"},
        "body_template": {"user_id": "{{input.user_id}}"},
        "timeout_ms": 3000,
        "expected_status_codes": [200],
    }
    body = endpoint_body(name, spec=spec, retry_policy={"max_attempts": 1})
    api.call("POST", "/endpoints", body, expect=201)


def every_row(database: Database) -> list[str]:
    """Every row of every table as JSON text (the secret's ciphertext column left out)."""
    tables = database.run(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    )
    rows: list[str] = []
    for table in sorted(str(t["table_name"]) for t in tables):
        query = f'SELECT to_jsonb(t) AS row FROM "{table}" t'
        for row in database.run(query):
            value = row["row"]
            if table == "secrets":
                value.pop("encrypted_value", None)
            rows.append(f"{table}: {json.dumps(value)}")
    return rows


def log_lines(records: list[logging.LogRecord]) -> list[str]:
    """Each record as the JSON formatter renders it (message, extra fields, traceback)."""
    formatter = JsonFormatter()
    return [formatter.format(r) + " " + r.getMessage() for r in records]


def test_secret_values_never_leave_the_request_they_are_sent_in(
    roots: Roots,
    recording_api: RecordingApi,
    worker: Worker,
    http_target: HttpTarget,
    database: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    api = recording_api
    first, second = "sk-first-" + uuid.uuid4().hex, "sk-second-" + uuid.uuid4().hex
    # A hostile receiver echoes the key it got into its response body and headers.
    http_target.script("/ok", TargetReply(200, body=f"your key {first}"))

    api.call("POST", "/secrets", {"name": SECRET, "value": first}, expect=201)
    register_endpoint(api, "partner-ok", http_target.url("/ok"))
    register_endpoint(api, "partner-down", http_target.url("/down"))
    assert deliver(api, worker, "partner-ok", "u1")["status"] == "SUCCESS"

    api.call("PUT", f"/secrets/{SECRET}", {"value": second})
    http_target.script("/ok", TargetReply(200, body=f"your key {second}"))
    http_target.script("/down", TargetReply(500, body=f"bad {second}", headers={"X-K": second}))
    worker.close()  # a new worker process: no cached value from before the rotation
    rotated = worker_of(roots.current)
    try:
        assert deliver(api, rotated, "partner-ok", "u2")["status"] == "SUCCESS"
        assert deliver(api, rotated, "partner-down", "u3")["status"] == "FAILED"
    finally:
        rotated.stop()
        rotated.drain(5)
        rotated.close()
    for path in ("/secrets", f"/secrets/{SECRET}", "/endpoints/partner-ok", "/jobs"):
        api.call("GET", path)

    sent = [r.headers.get("x-api-key") for r in http_target.received()]
    assert sent == [first, second, second]
    haystacks = api.dumped() + log_lines(caplog.records) + every_row(database)
    assert len(caplog.records) > 0 and any("attempts:" in h for h in haystacks)
    leaks = [h[:2000] for h in haystacks if first in h or second in h]
    assert leaks == [], "\n".join(leaks)


def _restart_with(api: RecordingApi, monkeypatch: pytest.MonkeyPatch, **env: str | None) -> None:
    """A process restart as far as settings go: new env, every per-process cache dropped."""
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    api.restart()


def test_wrong_encryption_key_fails_the_delivery_with_a_clear_error(
    roots: Roots,
    recording_api: RecordingApi,
    app_env: dict[str, str],
    http_target: HttpTarget,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = recording_api
    api.call("POST", "/secrets", {"name": SECRET, "value": "sk-under-key-a"}, expect=201)
    register_endpoint(api, "partner", http_target.url("/ok"))
    _restart_with(api, monkeypatch, TE_SECRET_ENCRYPTION_KEY=KEY_B)

    worker = worker_of(roots.current)
    try:
        execution = deliver(api, worker, "partner", "u1")
    finally:
        worker.stop()
        worker.close()

    assert execution["status"] == "FAILED"
    attempts = api.call("GET", f"/executions/{execution['execution_id']}/attempts")["items"]
    error = attempts[0]["error"]
    assert error["type"] == "TEMPLATE_RESOLUTION_FAILED", attempts
    assert "cannot be decrypted" in error["message"]
    assert "TE_SECRET_DECRYPTION_KEYS" in error["message"]
    assert http_target.received() == []
    assert "sk-under-key-a" not in json.dumps(api.dumped())


def test_key_rotation_keeps_old_secrets_readable_and_seals_new_ones_with_the_new_key(
    roots: Roots,
    recording_api: RecordingApi,
    app_env: dict[str, str],
    http_target: HttpTarget,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chalicelib.crypto import key_id
    from chalicelib.settings import decode_key

    api = recording_api
    key_a = app_env["TE_SECRET_ENCRYPTION_KEY"]
    api.call("POST", "/secrets", {"name": SECRET, "value": "sk-old"}, expect=201)
    register_endpoint(api, "partner", http_target.url("/ok"))
    _restart_with(api, monkeypatch, TE_SECRET_ENCRYPTION_KEY=KEY_B, TE_SECRET_DECRYPTION_KEYS=key_a)

    api.call("POST", "/secrets", {"name": "other_key", "value": "sk-new"}, expect=201)
    worker = worker_of(roots.current)
    try:
        assert deliver(api, worker, "partner", "u1")["status"] == "SUCCESS"
    finally:
        worker.stop()
        worker.close()

    assert [r.headers.get("x-api-key") for r in http_target.received()] == ["sk-old"]
    blobs = {
        r["name"]: bytes(r["encrypted_value"])
        for r in database.run("SELECT name, encrypted_value FROM secrets")
    }
    assert blobs[SECRET][1:5] == key_id(decode_key(key_a, "A"))
    assert blobs["other_key"][1:5] == key_id(decode_key(KEY_B, "B"))
