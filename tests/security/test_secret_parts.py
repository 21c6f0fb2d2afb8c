"""A delivery's errors hold no part of a secret, and a secret host is never looked up.

redis-py quotes the port it could not parse: with ``redis://127.0.0.1:{{secret.pw}}/0``
and a secret holding a ``/`` after 13 of its 18 characters, its message showed those 13
characters, which the redactor (whole secrets only) let through into the attempt error any
``read`` key can fetch. Such rows can no longer be written (a secret in a host or port is
422); rows stored before are written here straight into the table.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.redaction import LIVE_SECRETS
from chalicelib.worker import Worker
from tests.security.test_secrets_scenario import (
    RecordingApi,
    deliver,
    recording_api,  # noqa: F401 (a fixture used below)
    worker,  # noqa: F401 (a fixture used below)
)

SECRET = "Zq7k9pX2mWv4s/Lr8T"  # a "/" after 13 of 18 characters


def runs(secret: str) -> list[str]:
    return [secret[i : i + 6] for i in range(len(secret) - 5)]


def stored_redis_endpoint(api: RecordingApi, database: Database, name: str, url: str) -> None:
    """A REDIS_STREAM endpoint whose redis_url is ``url``, as a row stored before the write
    rules refused it (the API answers 422 for it today)."""
    spec = {"redis_url": url, "stream": "s", "fields_template": {"a": "{{input.user_id}}"}}
    body = {"name": name, "type": "REDIS_STREAM", "spec": spec, "retry_policy": {"max_attempts": 1}}
    refused = api._api.post("/endpoints", body)
    assert refused.status == 422 and refused.body["error"]["code"] == "INVALID_TARGET"
    api.call("POST", "/endpoints", {**body, "spec": {**spec, "redis_url": "redis://h/0"}}, 201)
    database.execute(
        "UPDATE endpoints SET spec = CAST(:spec AS JSONB) WHERE name = :name",
        spec=json.dumps(spec),
        name=name,
    )


@pytest.fixture
def secret(recording_api: RecordingApi) -> Iterator[str]:  # noqa: F811
    recording_api.call("POST", "/secrets", {"name": "pw", "value": SECRET}, expect=201)
    yield SECRET
    LIVE_SECRETS.clear()


def test_an_attempt_error_quoting_part_of_a_secret_shows_none_of_it(
    recording_api: RecordingApi,  # noqa: F811
    worker: Worker,  # noqa: F811
    database: Database,
    secret: str,
) -> None:
    api = recording_api
    stored_redis_endpoint(api, database, "port", "redis://127.0.0.1:{{secret.pw}}/0")
    execution = deliver(api, worker, "port", "u1")
    assert execution["status"] == "FAILED"
    [attempt] = api.call("GET", f"/executions/{execution['execution_id']}/attempts")["items"]
    message = attempt["error"]["message"]
    assert "[REDACTED]" in message, message
    dumped = " ".join(api.dumped())
    assert [run for run in runs(secret) if run in dumped] == []


def test_a_host_holding_a_secret_is_refused_before_any_lookup(
    recording_api: RecordingApi,  # noqa: F811
    worker: Worker,  # noqa: F811
    database: Database,
    secret: str,
) -> None:
    api = recording_api
    host_secret = f"h{uuid.uuid4().hex[:12]}"
    api.call("POST", "/secrets", {"name": "host", "value": host_secret}, expect=201)
    stored_redis_endpoint(api, database, "host", "redis://{{secret.host}}.example:6379/0")
    execution = deliver(api, worker, "host", "u2")
    assert execution["status"] == "FAILED"
    [attempt] = api.call("GET", f"/executions/{execution['execution_id']}/attempts")["items"]
    message = attempt["error"]["message"]
    assert "secret" in message and "before any name lookup" in message, message
    assert host_secret not in " ".join(api.dumped())


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("HTTP", {"url": "http://{{secret.host}}.example/hook", "method": "POST"}),
        ("KAFKA", {"bootstrap_servers": "{{secret.host}}.example:9092", "topic": "t"}),
    ],
)
def test_a_host_holding_a_secret_is_refused_with_private_targets_allowed_too(
    recording_api: RecordingApi,  # noqa: F811
    worker: Worker,  # noqa: F811
    database: Database,
    secret: str,
    kind: str,
    spec: dict[str, str],
) -> None:
    """The tests' worker allows private targets, so no address check of ours runs: the
    transport's own name lookup would have sent the secret; it is refused before."""
    api = recording_api
    host_secret = f"h{uuid.uuid4().hex[:12]}"
    api.call("POST", "/secrets", {"name": "host", "value": host_secret}, expect=201)
    name = f"{kind.lower()}-host"
    body = {"name": name, "type": kind, "spec": spec, "retry_policy": {"max_attempts": 1}}
    assert api._api.post("/endpoints", body).status == 422  # refused when written
    plain = {k: v.replace("{{secret.host}}", "plain") for k, v in spec.items()}
    api.call("POST", "/endpoints", {**body, "spec": plain}, expect=201)
    database.execute(  # a row stored before the write rule refused it
        "UPDATE endpoints SET spec = CAST(:spec AS JSONB) WHERE name = :name",
        spec=json.dumps(spec),
        name=name,
    )
    execution = deliver(api, worker, name, "u3")
    assert execution["status"] == "FAILED"
    [attempt] = api.call("GET", f"/executions/{execution['execution_id']}/attempts")["items"]
    assert "before any name lookup" in attempt["error"]["message"], attempt["error"]
    assert host_secret not in " ".join(api.dumped())
