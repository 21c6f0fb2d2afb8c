"""Ordering keys delivered by real workers to a real HTTP target on loopback: executions of
one endpoint sharing an ``ordering_key`` start one at a time, in the order their jobs were
created (DELAYED: by due time), the next only once the previous ended; retries hold the
key; a failed head skips or blocks its key; no key holds up another; and it holds across
two workers and a crashed worker's reclaim."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.worker import Worker
from tests.conftest import ApiClient
from tests.integration.worker.conftest import settle
from tests.support.factories import register_endpoint
from tests.support.seed.worker import statuses
from tests.support.served import HttpTarget
from tests.support.waiting import wait_for

#: The claim decides what these tests see: make test runs them again in CockroachDB's
#: configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


def hook(api: ApiClient, target: HttpTarget, name: str, **extra: Any) -> None:
    spec = {"url": target.url(f"/{name}"), "method": "POST", "expected_status_codes": [200]}
    register_endpoint(api, name, spec=spec, **extra)


def post(api: ApiClient, endpoint: str, key: str, ordering_key: str | None, **extra: Any) -> str:
    body: dict[str, Any] = {
        "endpoint": endpoint,
        "trigger": "IMMEDIATE",
        "idempotency_key": key,
        "input": {"key": ordering_key, "n": key},
        **extra,
    }
    if ordering_key is not None:
        body["ordering_key"] = ordering_key
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def arrivals(target: HttpTarget, path: str) -> list[dict[str, Any]]:
    return [r.json() for r in target.received(path)]


def by_key(target: HttpTarget, path: str) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for body in arrivals(target, path):
        seen[body["key"]].append(body["n"])
    return dict(seen)


def waiting(db: Database, ids: list[str]) -> dict[str, bool]:
    rows = db.run(
        "SELECT execution_id, ordering_wait FROM executions WHERE execution_id = ANY(:ids)",
        ids=ids,
    )
    return {r["execution_id"]: r["ordering_wait"] for r in rows}


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    """The workers' rings on threads until the block ends."""
    stop = threading.Event()
    rings = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    for ring in rings:
        ring.start()
    try:
        yield
    finally:
        stop.set()
        for ring in rings:
            ring.join(10)


def delivered(db: Database, ids: list[str], timeout: float = 60) -> None:
    wait_for(
        lambda: statuses(db, ids),
        f"{len(ids)} ended",
        until=lambda c: c.get("SUCCESS", 0) + c.get("FAILED", 0) == len(ids),
        timeout=timeout,
    )


# -- order per key ----------------------------------------------------------------------


def test_only_the_head_of_a_key_is_claimable_and_the_next_waits_for_its_end(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    hook(api, http_target, "seq")
    ids = [post(api, "seq", f"k{i}", "A") for i in range(3)]
    other = post(api, "seq", "free", None)
    assert waiting(database, [*ids, other]) == {
        ids[0]: False,
        ids[1]: True,
        ids[2]: True,
        other: False,
    }
    worker = make_worker()
    claimed = worker.run_once()
    worker.drain(10)
    assert claimed == 2  # the key's head and the unkeyed job, never a second of the key
    assert statuses(database, ids) == {"SUCCESS": 1, "QUEUED": 2}
    assert waiting(database, ids[1:]) == {ids[1]: False, ids[2]: True}  # released at its end
    assert settle(worker, database, ids) == {"SUCCESS": 3}
    assert by_key(http_target, "/seq")["A"] == ["k0", "k1", "k2"]
