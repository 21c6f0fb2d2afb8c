"""``GET /endpoints`` filtered by paused state and by health, over real rows: the health is
the overview's (delivery summary rows written by the real finalize statement)."""

from __future__ import annotations

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.seed.jobs import record_attempts


def _endpoint(api: ApiClient, name: str) -> None:
    body = {"name": name, "type": "HTTP", "spec": {"url": "http://127.0.0.1:9/x", "method": "POST"}}
    assert api.post("/endpoints", body).status == 201


def _delivered(api: ApiClient, db: Database, endpoint: str, outcome: str) -> None:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": f"{endpoint}-1"}
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    error = None if outcome == "SUCCESS" else "HTTP_ERROR"
    record_attempts(db, reply.body["execution"]["execution_id"], [(outcome, 5, error)])


def _names(api: ApiClient, query: str) -> list[str]:
    reply = api.get(f"/endpoints?{query}")
    assert reply.status == 200, reply.body
    return [e["name"] for e in reply.body["items"]]


def test_the_list_filters_by_paused_state_and_health(api: ApiClient, database: Database) -> None:
    for name in ("calm", "broken", "quiet", "held"):  # newest last: listed first
        _endpoint(api, name)
    _delivered(api, database, "calm", "SUCCESS")
    _delivered(api, database, "broken", "FAILED")
    assert api.post("/endpoints/held/pause").status == 200
    healths = {e["endpoint"]: e["health"] for e in api.get("/overview").body["endpoints"]}
    assert healths == {"calm": "HEALTHY", "broken": "FAILING"}

    assert _names(api, "") == ["held", "quiet", "broken", "calm"]
    assert _names(api, "paused=true") == ["held"]
    assert _names(api, "paused=false") == ["quiet", "broken", "calm"]
    assert _names(api, "health=HEALTHY") == ["calm"]
    assert _names(api, "health=FAILING") == ["broken"]
    assert _names(api, "health=DEGRADED") == []
    assert _names(api, "health=IDLE") == ["held", "quiet"]
    assert _names(api, "health=IDLE&paused=false") == ["quiet"]
    assert _names(api, "health=FAILING&paused=true") == []


def test_a_filtered_list_pages_with_its_cursor(api: ApiClient, database: Database) -> None:
    for name in ("idle-a", "busy", "idle-b", "idle-c"):
        _endpoint(api, name)
    _delivered(api, database, "busy", "SUCCESS")
    first = api.get("/endpoints?health=IDLE&limit=2").body
    assert [e["name"] for e in first["items"]] == ["idle-c", "idle-b"]
    second = api.get(f"/endpoints?health=IDLE&limit=2&cursor={first['cursor']}").body
    assert [e["name"] for e in second["items"]] == ["idle-a"]
    assert second["cursor"] is None


def test_bad_filter_values_are_400_naming_them(api: ApiClient) -> None:
    for query, named in (("paused=yes", "paused"), ("health=GREEN", "health")):
        reply = api.get(f"/endpoints?{query}")
        assert reply.status == 400, reply.body
        assert reply.body["error"]["code"] == "INVALID_REQUEST"
        assert named in reply.body["error"]["message"]
