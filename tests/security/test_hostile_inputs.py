"""Hostile inputs get a clear 4xx with the envelope, never a 500 and never a half-write.

Complements tests/integration/test_api_foundation.py (oversize bodies, deep nesting, invalid
UTF-8, huge limits, forged cursors, content types) and the worker's CRLF header tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.wiring.worker import worker_of
from tests.support.api_client import ApiClient
from tests.support.roots import Roots
from tests.support.served import HttpTarget
from tests.support.waiting import wait_for

NUL = "\u0000"


def _rows(database: Database, table: str) -> int:
    return int(database.run(f"SELECT count(*) AS n FROM {table}")[0]["n"])


@pytest.mark.parametrize(
    ("path", "body", "table"),
    [
        (
            "/payload-specs",
            {"name": "p1", "schema": {"a" + NUL: {"type": "string"}}},
            "payload_specs",
        ),
        ("/configs", {"name": "c1", "values": {"k": "v" + NUL}}, "configs"),
        ("/secrets", {"name": "s1", "value": "v" + NUL}, "secrets"),
        (
            "/endpoints",
            {"name": "e1", "type": "HTTP", "spec": {"url": "http://x/" + NUL, "method": "GET"}},
            "endpoints",
        ),
    ],
)
def test_nul_characters_in_bodies_are_a_400_and_nothing_is_written(
    api: ApiClient, database: Database, path: str, body: dict[str, Any], table: str
) -> None:
    reply = api.post(path, body)
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"
    assert "NUL" in reply.body["error"]["message"]
    assert _rows(database, table) == 0


@pytest.mark.parametrize(
    "raw",
    [b'{"name": "c", "values": {"k": "\\ud800"}}', b'{"name": "c", "values": {"\\udc00x": 1}}'],
)
def test_lone_surrogates_are_a_400(api: ApiClient, database: Database, raw: bytes) -> None:
    reply = api.post("/configs", raw=raw)
    assert reply.status == 400 and reply.error_code == "INVALID_REQUEST", reply.body
    assert _rows(database, "configs") == 0


def test_nul_in_job_input_is_a_400(api: ApiClient, database: Database) -> None:
    assert (
        api.post(
            "/endpoints",
            {"name": "e", "type": "HTTP", "spec": {"url": "http://example.com/", "method": "POST"}},
        ).status
        == 201
    )
    reply = api.post(
        "/jobs",
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"x": NUL}},
    )
    assert reply.status == 400 and reply.error_code == "INVALID_REQUEST"
    assert _rows(database, "jobs") == 0 and _rows(database, "executions") == 0


@pytest.mark.parametrize(
    "path", ["/jobs?endpoint=%00", "/jobs?status=ACTIVE%00", "/jobs/j/executions?status=%00"]
)
def test_nul_in_query_and_path_parameters_is_a_400(api: ApiClient, path: str) -> None:
    reply = api.get(path)
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"


@pytest.mark.parametrize(
    "name", ["x'; DROP TABLE configs; --", 'a" OR "1"="1', "../etc/passwd", "UPPER", "a b"]
)
def test_sql_and_path_metacharacters_in_names_are_refused(
    api: ApiClient, database: Database, name: str
) -> None:
    reply = api.post("/configs", {"name": name, "values": {}})
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"
    assert _rows(database, "configs") == 0


def test_sql_metacharacters_in_values_are_stored_verbatim(api: ApiClient) -> None:
    value = "'); DELETE FROM configs; --"
    assert api.post("/configs", {"name": "c", "values": {"v": value}}).status == 201
    assert api.get("/configs/c").body["values"] == {"v": value}


@pytest.mark.parametrize(
    "body",
    [
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k", "surprise": 1},
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": 7},
        {"endpoint": ["e"], "trigger": "IMMEDIATE", "idempotency_key": "k"},
        {"endpoint": "e", "trigger": "SOMETIMES", "idempotency_key": "k"},
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k", "headers": ["a"]},
        {"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k", "delay": "5s"},
    ],
)
def test_unknown_fields_and_wrong_types_on_jobs_are_a_400(
    api: ApiClient, database: Database, body: dict[str, Any]
) -> None:
    assert (
        api.post(
            "/endpoints",
            {"name": "e", "type": "HTTP", "spec": {"url": "http://example.com/", "method": "POST"}},
        ).status
        == 201
    )
    reply = api.post("/jobs", body)
    assert reply.status == 400, reply.body
    assert reply.error_code == "INVALID_REQUEST"
    assert _rows(database, "jobs") == 0


def test_database_failures_do_not_leak_sql_or_server_text(
    api: ApiClient, database: Database
) -> None:
    database.execute("ALTER TABLE configs RENAME TO configs_gone")
    reply = api.get("/configs")
    assert reply.status == 500
    assert reply.error_code == "INTERNAL_ERROR"
    message = reply.body["error"]["message"]
    assert message == "An internal error occurred."
    assert "configs" not in message and "SQLSTATE" not in message


def test_placeholders_in_input_values_are_delivered_literally(
    api: ApiClient, http_target: HttpTarget, roots: Roots
) -> None:
    """Input is data: a value that looks like {{secret.x}} must not be expanded."""
    assert api.post("/secrets", {"name": "k", "value": "the-real-secret"}).status == 201
    assert (
        api.post(
            "/endpoints",
            {
                "name": "echo",
                "type": "HTTP",
                "spec": {
                    "url": http_target.url("/echo"),
                    "method": "POST",
                    "headers": {"X-Key": "{{secret.k}}"},
                    "body_template": {"note": "{{input.note}}", "text": "say {{input.note}}"},
                },
            },
        ).status
        == 201
    )
    smuggled = "{{secret.k}}"
    job = api.post(
        "/jobs",
        {
            "endpoint": "echo",
            "trigger": "IMMEDIATE",
            "idempotency_key": "k",
            "input": {"note": smuggled},
        },
    )
    assert job.status == 201
    worker = worker_of(roots.current)
    try:

        def sent() -> list[Any]:
            worker.run_once()
            worker.drain(5)
            return http_target.received("/echo")

        wait_for(sent, "the delivery to /echo")
    finally:
        worker.stop()
        worker.drain(5)
        worker.close()
    received = http_target.received("/echo")[0]
    assert received.json() == {"note": smuggled, "text": f"say {smuggled}"}
    assert "the-real-secret" not in str(received.json())


def test_numbers_that_grow_once_stored_count_against_the_body_limit(
    api: ApiClient, database: Database
) -> None:
    """JSONB keeps numbers exact, without exponents: ``1e300`` (5 bytes sent) is stored and
    read back as 301 digits. A body under the 1 MiB limit as sent but far over it as stored
    (each later GET of the job would answer ~50 MB) is a 413, and nothing is written."""
    endpoint = {
        "name": "e",
        "type": "HTTP",
        "spec": {"url": "http://example.com/", "method": "POST"},
    }
    assert api.post("/endpoints", endpoint).status == 201
    numbers = ",".join(["1e300"] * 150_000)  # 900 KB sent, 45 MB stored
    raw = (
        '{"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"v": ['
        + numbers
        + "]}}"
    ).encode()
    reply = api.post("/jobs", raw=raw)
    assert reply.status == 413 and reply.error_code == "PAYLOAD_TOO_LARGE"
    assert "as strings" in reply.body["error"]["message"]
    assert _rows(database, "jobs") == 0 and _rows(database, "executions") == 0
    # A few such numbers fit: the limit is on the whole body as stored.
    few = {
        "endpoint": "e",
        "trigger": "IMMEDIATE",
        "idempotency_key": "k2",
        "input": {"v": [1e300]},
    }
    created = api.post("/jobs", few)
    assert created.status == 201
    assert api.get(f"/jobs/{created.body['job_id']}").body["input"] == {"v": [10**300]}
