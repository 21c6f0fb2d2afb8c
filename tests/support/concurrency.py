"""What the concurrency key tests share: posting jobs with a ``concurrency_key`` (one by
one or in batches) to a :class:`tests.support.ordering.KeyedSink`, whose bodies carry the
key and the job's idempotency key, and reading a gated execution's state."""

from __future__ import annotations

from typing import Any

from chalicelib.db.connection import Database
from tests.support.api_client import ApiClient
from tests.support.ordering import KeyedSink, sink_endpoint


def limited_endpoint(
    api: ApiClient, sink: KeyedSink, name: str, per_key: int, **extra: Any
) -> None:
    """An endpoint delivering to ``sink`` that runs at most ``per_key`` of a key at once."""
    flow = {"max_concurrency_per_key": per_key, **extra.pop("flow_control", {})}
    sink_endpoint(api, sink, name, flow_control=flow, **extra)


def job(endpoint: str, n: str, concurrency_key: str | None, **extra: Any) -> dict[str, Any]:
    """An IMMEDIATE job's body (idempotency key ``n``) whose input the sink records."""
    body: dict[str, Any] = {
        "endpoint": endpoint,
        "trigger": "IMMEDIATE",
        "idempotency_key": n,
        "input": {"key": concurrency_key or "-", "n": n},
        **extra,
    }
    if concurrency_key is not None:
        body["concurrency_key"] = concurrency_key
    return body


def post(api: ApiClient, endpoint: str, n: str, concurrency_key: str | None, **extra: Any) -> str:
    """``POST /jobs``; the execution's id."""
    reply = api.post("/jobs", job(endpoint, n, concurrency_key, **extra))
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def batch(api: ApiClient, endpoint: str, items: list[tuple[str, str | None]]) -> list[str]:
    """``POST /jobs/batch`` of IMMEDIATE jobs (idempotency key, concurrency key), at most
    1,000 at a time; their execution ids, in order."""
    ids: list[str] = []
    for start in range(0, len(items), 1000):
        jobs = [job(endpoint, n, key) for n, key in items[start : start + 1000]]
        reply = api.post("/jobs/batch", {"jobs": jobs})
        assert reply.status == 200, reply.body
        assert {item["status"] for item in reply.body["items"]} == {201}
        ids += [str(item["job"]["execution"]["execution_id"]) for item in reply.body["items"]]
    return ids


def gate(db: Database, ids: list[str]) -> dict[str, tuple[str | None, bool]]:
    """Each execution's (concurrency_key, ordering_wait): the key only when gated."""
    rows = db.run(
        "SELECT execution_id, concurrency_key, ordering_wait FROM executions"
        " WHERE execution_id = ANY(:ids)",
        ids=ids,
    )
    return {r["execution_id"]: (r["concurrency_key"], r["ordering_wait"]) for r in rows}


def released(db: Database, ids: list[str]) -> set[str]:
    """Those of ``ids`` not waiting for their key's turn."""
    return {i for i, (_, wait) in gate(db, ids).items() if not wait}
