"""The API foundation through chalice.test.Client: auth, envelope, request ids, body limits,
content types, rate limiting, API keys until revoked, and pagination."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import app as app_module
from chalicelib.api import PUBLIC_ROUTES
from chalicelib.db.connection import Database
from chalicelib.domain.api_keys import Scope
from chalicelib.errors import Unauthorized
from chalicelib.services.api_keys import ApiKeyService
from tests.support.api_client import ApiClient
from tests.support.clock import FakeClock

#: Served without a key: the OpenAPI document, the load balancers' health check, and the
#: dashboard's page and files (whose data calls carry the key).
PUBLIC = {
    ("GET", "/openapi.json"),
    ("GET", "/health"),
    ("GET", "/health/live"),
    ("GET", "/ui"),
    ("GET", "/ui/dummy-1"),
}


def all_routes() -> list[tuple[str, str]]:
    """Every (METHOD, concrete path) the app serves, path parameters filled with dummies."""
    routes = []
    for path, entries in app_module.app.routes.items():
        concrete = re.sub(r"\{[^}]+\}", "dummy-1", path)
        routes.extend((method, concrete) for method in entries)
    return sorted(routes)


def assert_envelope(reply: Any, status: int, code: str) -> None:
    assert reply.status == status, reply.body
    assert set(reply.body) == {"error"}
    error = reply.body["error"]
    assert set(error) == {"code", "message", "request_id"}
    assert error["code"] == code and error["message"]
    assert error["request_id"].startswith("req_")
    assert error["request_id"] == reply.headers["x-request-id"]


@pytest.mark.parametrize(("method", "path"), [r for r in all_routes() if r not in PUBLIC])
def test_every_route_requires_an_api_key(api: ApiClient, method: str, path: str) -> None:
    body = {} if method in ("POST", "PUT", "PATCH") else None
    assert_envelope(api.request(method, path, body, auth=False), 401, "UNAUTHORIZED")
    wrong = api.request(method, path, body, headers={"authorization": "Bearer te_wrong"})
    assert_envelope(wrong, 401, "UNAUTHORIZED")
    basic = api.request(method, path, body, headers={"authorization": "Basic dXNlcjpwdw=="})
    assert_envelope(basic, 401, "UNAUTHORIZED")


def test_route_list_is_not_empty_and_public_routes_are_known() -> None:
    routes = set(all_routes())
    assert ("POST", "/configs") in routes
    assert routes >= PUBLIC
    assert {(m, re.sub(r"dummy-1", "{name}", p)) for m, p in PUBLIC} == PUBLIC_ROUTES


def test_every_response_carries_a_request_id(api: ApiClient) -> None:
    replies = [
        api.get("/configs"),
        api.post("/configs", {"name": "c", "values": {}}),
        api.get("/configs/c"),
        api.get("/configs/missing"),
        api.delete("/configs/c"),
        api.get("/openapi.json", auth=False),
    ]
    ids = [r.headers["x-request-id"] for r in replies]
    assert all(i.startswith("req_") for i in ids)
    assert len(set(ids)) == len(ids)
    assert replies[3].body["error"]["request_id"] == ids[3]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{bad json", "Malformed JSON"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"[1, 2]", "JSON object"),
        (b"", "required"),
        (b'{"a":' + b"[" * 40 + b"]" * 40 + b"}", "deeper than 32"),
        (b'{"a":' * 33 + b"1" + b"}" * 33, "deeper than 32"),
    ],
)
def test_malformed_bodies_are_400_in_the_envelope(
    api: ApiClient, raw: bytes, fragment: str
) -> None:
    reply = api.post("/configs", raw=raw)
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert fragment in reply.body["error"]["message"]


def test_json_at_the_depth_limit_is_accepted(api: ApiClient) -> None:
    values: Any = 1
    for _ in range(30):  # body (1) + 30 objects + the leaf = 32 levels
        values = {"a": values}
    assert api.post("/configs", {"name": "deep", "values": values}).status == 201


def test_body_over_the_limit_is_413(api: ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TE_MAX_BODY_BYTES", "2048")
    api.restart()
    small = api.post("/configs", {"name": "small", "values": {"v": "x" * 1000}})
    assert small.status == 201
    reply = api.post("/configs", {"name": "big", "values": {"v": "x" * 4000}})
    assert_envelope(reply, 413, "PAYLOAD_TOO_LARGE")
    assert "2048" in reply.body["error"]["message"]


def test_wrong_content_type_is_415_in_the_envelope(api: ApiClient) -> None:
    reply = api.post("/configs", raw=b"name=x", headers={"content-type": "text/plain"})
    assert_envelope(reply, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_unsupported_method_is_405_in_the_envelope(api: ApiClient) -> None:
    reply = api.request("PATCH", "/configs", {})
    assert_envelope(reply, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in reply.headers["allow"] and "POST" in reply.headers["allow"]


def test_database_api_keys_work_until_revoked(api: ApiClient, database: Database) -> None:
    created = ApiKeyService(database).create("ci", Scope.WRITE)
    assert created.key.startswith("te_") and created.key_id.startswith("key_")
    assert created.key not in repr(created)
    stored = database.run("SELECT key_hash FROM api_keys WHERE key_id = :k", k=created.key_id)
    assert created.key.encode() not in bytes(stored[0]["key_hash"])

    api.key = created.key
    assert api.get("/configs").status == 200
    first = ApiKeyService(database).revoke(created.key_id)
    again = ApiKeyService(database).revoke(created.key_id)
    assert first.revoked_at is not None and again.revoked_at == first.revoked_at
    api.restart()  # a new API process: the short auth cache is gone
    assert_envelope(api.get("/configs"), 401, "UNAUTHORIZED")


def test_a_revoked_key_stops_working_in_every_process_within_the_cache_ttl(
    database: Database,
) -> None:
    """Two API processes (two authenticators over the real key table) that both cached the
    key: after revocation neither accepts it once the default TTL (5 s) has passed."""
    from chalicelib.api.auth import CACHE_TTL_SEC, Authenticator
    from chalicelib.db.queries import queries

    def lookup(digest: bytes) -> Scope | None:
        rows = database.run(queries["api_key_scope"], key_hash=digest)
        return Scope(rows[0]["scope"]) if rows else None

    assert CACHE_TTL_SEC <= 5
    created = ApiKeyService(database).create("two-processes", Scope.READ)
    clock = FakeClock(monotonic_start=1000.0)
    processes = [Authenticator(lookup=lookup, clock=clock.monotonic) for _ in range(2)]
    for auth in processes:
        auth.authenticate(f"Bearer {created.key}")
    ApiKeyService(database).revoke(created.key_id)
    clock.advance(seconds=CACHE_TTL_SEC + 0.01)
    for auth in processes:
        with pytest.raises(Unauthorized):
            auth.authenticate(f"Bearer {created.key}")


def test_the_key_cache_ttl_is_a_setting(
    api: ApiClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TE_API_KEY_CACHE_TTL_SEC", "0")
    api.restart()
    created = ApiKeyService(database).create("uncached", Scope.READ)
    api.key = created.key
    assert api.get("/configs").status == 200
    ApiKeyService(database).revoke(created.key_id)
    assert_envelope(api.get("/configs"), 401, "UNAUTHORIZED")  # same process, no wait


def test_a_key_revoked_before_use_never_works(api: ApiClient, database: Database) -> None:
    created = ApiKeyService(database).create("short-lived", Scope.READ)
    ApiKeyService(database).revoke(created.key_id)
    api.key = created.key
    assert_envelope(api.get("/configs"), 401, "UNAUTHORIZED")


def test_rate_limit_answers_429_with_retry_after(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TE_RATE_LIMIT_PER_SEC", "1")
    api.restart()
    replies = [api.get("/configs") for _ in range(12)]
    limited = [r for r in replies if r.status == 429]
    assert replies[0].status == 200
    assert limited, [r.status for r in replies]
    assert_envelope(limited[0], 429, "RATE_LIMITED")
    assert int(limited[0].headers["retry-after"]) >= 1
    assert api.get("/openapi.json", auth=False).status == 200


@pytest.mark.parametrize(
    "query",
    [
        "limit=201",
        "limit=0",
        "limit=-1",
        "limit=abc",
        "limit=99999999999",
        "cursor=not-a-cursor",
        "cursor=eyJ2IjoyfQ",
    ],
)
def test_bad_limit_or_cursor_is_400(api: ApiClient, query: str) -> None:
    for collection in ("/payload-specs", "/configs", "/secrets", "/endpoints"):
        assert_envelope(api.get(f"{collection}?{query}"), 400, "INVALID_REQUEST")


def page_through(api: ApiClient, path: str, limit: int, between: Any = None) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        suffix = f"&cursor={cursor}" if cursor else ""
        reply = api.get(f"{path}?limit={limit}{suffix}")
        assert reply.status == 200, reply.body
        assert len(reply.body["items"]) <= limit
        names.extend(item["name"] for item in reply.body["items"])
        cursor = reply.body["cursor"]
        if cursor is None:
            return names
        if between:
            between()


def test_pagination_returns_every_preexisting_row_once_despite_concurrent_inserts(
    api: ApiClient, database: Database
) -> None:
    for i in range(12):
        api.post("/configs", {"name": f"pre-{i:02d}", "values": {}})
    # Rows sharing one created_at (one transaction) are ordered by name.
    database.run(
        "INSERT INTO configs (name, values_json) "
        "SELECT 'same-' || g, CAST('{}' AS JSONB) FROM generate_series(1, 9) AS g"
    )
    preexisting = {f"pre-{i:02d}" for i in range(12)} | {f"same-{g}" for g in range(1, 10)}
    counter = iter(range(1000))

    def insert_more() -> None:
        for _ in range(3):
            api.post("/configs", {"name": f"new-{next(counter)}", "values": {}})

    seen = page_through(api, "/configs", 4, between=insert_more)
    assert len(seen) == len(set(seen))
    assert preexisting <= set(seen)
    assert [n for n in seen if n in preexisting] == sorted(
        preexisting, key=lambda n: (n.startswith("same"), n), reverse=True
    )


def test_default_and_maximum_page_sizes(api: ApiClient, database: Database) -> None:
    database.run(
        "INSERT INTO configs (name, values_json) "
        "SELECT 'c-' || g, CAST('{}' AS JSONB) FROM generate_series(1, 260) AS g"
    )
    first = api.get("/configs")
    assert len(first.body["items"]) == 50 and first.body["cursor"]
    biggest = api.get("/configs?limit=200")
    assert len(biggest.body["items"]) == 200
    assert len(page_through(api, "/configs", 200)) == 260
    assert json.dumps(first.body).count("c-") == 50
