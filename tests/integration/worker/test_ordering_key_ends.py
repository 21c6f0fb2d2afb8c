"""Ordering keys when a head ends badly or is taken away: a failed head skips or blocks
its key (retry, skip), every end releases the next (cancel, batch and bulk cancel, the
reclaimer's FAILED and set-aside, expiry), a crashed worker's head is reclaimed and still
holds its key, re-queued executions go back to their place, and a hung key holds up no
other."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.bulk import BulkOperator
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services.operations import OperationService
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint, retry_policy
from tests.support.ordering import (
    KeyedSink,
    arrivals,
    batch,
    delivered,
    hook,
    post,
    running,
    sink_endpoint,
    waiting,
)
from tests.support.seed.worker import statuses
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for
from tests.support.worker_runs import settle

#: The claim decides what these tests see: make test runs them again in CockroachDB's
#: configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


@pytest.fixture
def sink() -> Iterator[KeyedSink]:
    target = KeyedSink()
    yield target
    target.close()


# -- a failed head: skip or block -------------------------------------------------------


def test_with_skip_a_failed_head_lets_the_next_start(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    hook(api, http_target, "skips", ordering={"on_failure": "skip"})
    http_target.script("/skips", Reply(500), Reply(200))
    ids = [post(api, "skips", f"k{i}", "A") for i in range(2)]
    assert settle(make_worker(), database, ids) == {"FAILED": 1, "SUCCESS": 1}
    assert [b["n"] for b in arrivals(http_target, "/skips")] == ["k0", "k1"]
    assert api.get("/endpoints/skips/ordering-keys").body == {"items": [], "cursor": None}


def _blocked(api: ApiClient, database: Database, make_worker: Any, target: HttpTarget) -> list[str]:
    """An endpoint that blocks on a failed head; key A's head failed, two behind it, while
    key B of the same endpoint goes on."""
    hook(api, target, "blocks", ordering={"on_failure": "block"})
    target.script("/blocks", Reply(500), Reply(200))
    ids = [post(api, "blocks", f"k{i}", "A") for i in range(3)]
    worker = make_worker()
    assert settle(worker, database, [ids[0]]) == {"FAILED": 1}
    other = post(api, "blocks", "other", "B")
    assert settle(worker, database, [other]) == {"SUCCESS": 1}
    assert statuses(database, ids[1:]) == {"QUEUED": 2}
    assert waiting(database, ids[1:]) == {ids[1]: True, ids[2]: True}
    return ids


def test_with_block_a_failed_head_holds_its_key_until_the_key_is_skipped(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    ids = _blocked(api, database, make_worker, http_target)
    listed = api.get("/endpoints/blocks/ordering-keys?state=blocked")
    assert listed.status == 200
    [item] = listed.body["items"]
    assert item["key"] == "A" and item["execution_id"] == ids[0] and item["since"]
    assert listed.body["cursor"] is None
    skipped = api.post("/endpoints/blocks/ordering-keys/A/skip")
    assert skipped.status == 200, skipped.body
    assert skipped.body == {"endpoint": "blocks", "key": "A", "state": "released"}
    assert api.get("/endpoints/blocks/ordering-keys").body["items"] == []
    assert settle(make_worker(), database, ids[1:]) == {"SUCCESS": 2}
    assert api.get(f"/executions/{ids[0]}").body["status"] == "FAILED"  # stays FAILED
    assert [b["n"] for b in arrivals(http_target, "/blocks")] == ["k0", "other", "k1", "k2"]
    again = api.post("/endpoints/blocks/ordering-keys/A/skip")
    assert again.status == 409
    assert again.body["error"]["code"] == "ORDERING_KEY_NOT_BLOCKED"


def test_with_block_retrying_the_failed_head_unblocks_its_key_and_it_goes_first(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    ids = _blocked(api, database, make_worker, http_target)
    retried = api.post(f"/executions/{ids[0]}/retry")
    assert retried.status == 200, retried.body
    assert api.get("/endpoints/blocks/ordering-keys").body["items"] == []
    assert settle(make_worker(), database, ids) == {"SUCCESS": 3}
    assert [b["n"] for b in arrivals(http_target, "/blocks")] == ["k0", "other", "k0", "k1", "k2"]


def test_a_retried_execution_of_a_skip_key_goes_back_to_its_place(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    """A retry keeps the execution's place: it never runs beside the key's head, and as
    the head has not started, it goes first (a head that started holds the key: see
    test_a_head_that_started_holds_its_key_against_one_due_earlier)."""
    hook(api, http_target, "skips2")
    http_target.script("/skips2", Reply(500), Reply(200))
    first = post(api, "skips2", "k0", "A")
    worker = make_worker()
    assert settle(worker, database, [first]) == {"FAILED": 1}
    second, third = post(api, "skips2", "k1", "A"), post(api, "skips2", "k2", "A")
    assert waiting(database, [second, third]) == {second: False, third: True}
    assert api.post(f"/executions/{first}/retry").status == 200
    assert waiting(database, [first, second, third]) == {first: False, second: True, third: True}
    assert settle(worker, database, [first, second, third]) == {"SUCCESS": 3}
    assert [b["n"] for b in arrivals(http_target, "/skips2")] == ["k0", "k0", "k1", "k2"]


# -- ends that release the next: cancel, batch cancel, reclaim ----------------------------


def test_cancelling_the_head_releases_the_next_and_cancelling_one_behind_it_does_not(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "cancels")
    ids = [post(api, "cancels", f"k{i}", "A") for i in range(3)]
    assert api.post(f"/executions/{ids[1]}/cancel").status == 200
    assert waiting(database, [ids[0], ids[2]]) == {ids[0]: False, ids[2]: True}
    assert api.post(f"/executions/{ids[0]}/cancel").status == 200
    assert waiting(database, [ids[2]]) == {ids[2]: False}


def test_cancelling_a_batch_leaves_no_key_held_by_a_cancelled_head(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "batched")
    ids = batch(api, "batched", [("b0", "A"), ("b1", "A")])
    [batch_id] = {
        r["batch_id"]
        for r in database.run(
            "SELECT batch_id FROM executions WHERE execution_id = ANY(:ids)", ids=ids
        )
    }
    later = post(api, "batched", "after", "A")  # not in the batch
    assert api.post(f"/batches/{batch_id}/cancel").status == 200
    assert waiting(database, [later]) == {later: False}


def test_a_crashed_workers_head_is_reclaimed_and_still_holds_its_key(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    """Worker A claims the key's head (its target hangs) and dies; the reclaimer gives the
    head back (RETRYING): worker B delivers it before anything behind it, and A's late
    result changes nothing."""
    sink = KeyedSink(hang=frozenset({"A"}))
    try:
        policy = retry_policy(max_attempts=3)
        sink_endpoint(api, sink, "crash", retry_policy=policy)
        ids = [post(api, "crash", f"k{i}", "A") for i in range(3)]
        crashed = make_worker(worker_id="w-crashed")
        crashed.run_once()
        wait_for(lambda: sink.order(), "the head sent", until=lambda o: o == {"A": ["k0"]})
        long_ago = datetime.now(UTC) - timedelta(hours=1)
        database.execute(  # its lease ran out: it renews no more
            "UPDATE executions SET lease_expires_at = :t WHERE execution_id = :id",
            t=long_ago,
            id=ids[0],
        )
        [reclaimed] = StuckReclaimer(database, timeout_sec=60).reclaim()
        assert reclaimed.status == "RETRYING"
        assert waiting(database, ids) == {ids[0]: False, ids[1]: True, ids[2]: True}
        sink.hang = frozenset()
        sink.release()
        assert settle(make_worker(worker_id="w-b"), database, ids) == {"SUCCESS": 3}
        assert sink.order() == {"A": ["k0", "k0", "k1", "k2"]}
    finally:
        sink.close()


def test_a_reclaimed_head_with_no_attempts_left_fails_and_releases_or_blocks_its_key(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "lost")
    register_endpoint(api, "lost-block", ordering={"on_failure": "block"})
    ids = {
        name: [post(api, name, f"{name}-{i}", "A") for i in range(2)]
        for name in ("lost", "lost-block")
    }
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    database.execute(
        "UPDATE executions SET status = 'RUNNING', worker_id = 'gone', attempt_count = 1,"
        " started_at = :t, lease_expires_at = :t WHERE execution_id = ANY(:ids)",
        t=long_ago,
        ids=[ids["lost"][0], ids["lost-block"][0]],
    )
    reclaimed = StuckReclaimer(database, timeout_sec=60).reclaim()
    assert {r.status for r in reclaimed} == {"FAILED"}
    assert waiting(database, [ids["lost"][1], ids["lost-block"][1]]) == {
        ids["lost"][1]: False,
        ids["lost-block"][1]: True,
    }
    [item] = api.get("/endpoints/lost-block/ordering-keys").body["items"]
    assert item["execution_id"] == ids["lost-block"][0]


# -- no key holds up another --------------------------------------------------------------


def test_a_hung_head_holds_up_nothing_but_its_own_key(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    """One key's target hangs until its timeout; 100 other keys of 10 jobs each all finish
    while it hangs (completion, not timing)."""
    sink = KeyedSink(hang=frozenset({"hung"}))
    try:
        sink_endpoint(api, sink, "tenants", spec={"timeout_ms": 120_000})
        hung = [post(api, "tenants", f"h{i}", "hung") for i in range(3)]
        others: list[str] = []
        for round_ in range(10):
            others += batch(api, "tenants", [(f"r{round_}-t{t}", f"t{t}") for t in range(100)])
        first, second = make_worker(worker_id="w-1"), make_worker(worker_id="w-2")
        with running(first, second):
            delivered(database, others, timeout=120)
            assert statuses(database, hung) == {"RUNNING": 1, "QUEUED": 2}
            sink.release()
            delivered(database, hung)
        assert sink.order()["hung"] == ["h0", "h1", "h2"]
        assert all(sink.order()[f"t{t}"] == [f"r{r}-t{t}" for r in range(10)] for t in range(100))
    finally:
        sink.close()


# -- bulk actions, redrive and the reclaimer's set-aside ------------------------------------


def _bulk(api: ApiClient, database: Database, action: str, **filters: Any) -> None:
    reply = api.post("/executions/bulk", {"action": action, "filter": filters})
    assert reply.status == 202, reply.body
    operator = BulkOperator(OperationService(database))
    for _ in range(20):
        if not operator.run_once().more:
            break
    state = api.get(f"/operations/{reply.body['operation_id']}").body["state"]
    assert state == "DONE", state


def _fail_now(database: Database, ids: list[str]) -> None:
    """These heads ended FAILED, as a finalize leaves them (their key settled by hand:
    the finalize's own settling is tested above)."""
    database.execute(
        "UPDATE executions SET status = 'FAILED', attempt_count = 1, completed_at = now()"
        " WHERE execution_id = ANY(:ids)",
        ids=ids,
    )


def test_a_bulk_cancel_releases_each_key_whose_head_it_cancels(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "bulky")
    a = [post(api, "bulky", f"a{i}", "A") for i in range(2)]
    b = [post(api, "bulky", f"b{i}", "B") for i in range(2)]
    database.execute(  # B's head has started: a bulk cancel passes over it
        "UPDATE executions SET status = 'RUNNING', attempt_count = 1, started_at = now()"
        " WHERE execution_id = :id",
        id=b[0],
    )
    database.execute(  # the bulk action's filter: A's head only
        "UPDATE executions SET created_at = now() - INTERVAL '1 hour' WHERE execution_id = :id",
        id=a[0],
    )
    before = (datetime.now(UTC) - timedelta(minutes=30)).isoformat()
    _bulk(api, database, "cancel", endpoint="bulky", created_before=before)
    assert statuses(database, [a[0]]) == {"CANCELLED": 1}
    assert waiting(database, [a[1], b[1]]) == {a[1]: False, b[1]: True}


def test_a_bulk_retry_and_a_redrive_put_failed_heads_back_at_their_place(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "redo", ordering={"on_failure": "block"})
    heads = [post(api, "redo", f"h{k}", k) for k in ("A", "B")]
    behind = [post(api, "redo", f"n{k}", k) for k in ("A", "B")]
    _fail_now(database, heads)
    database.execute(
        "INSERT INTO ordering_keys (endpoint, ordering_key, blocked_execution_id, blocked_since)"
        " VALUES ('redo', 'A', :a, now()), ('redo', 'B', :b, now())"
        " ON CONFLICT (endpoint, ordering_key) DO UPDATE"
        " SET blocked_execution_id = excluded.blocked_execution_id,"
        "     blocked_since = excluded.blocked_since",
        a=heads[0],
        b=heads[1],
    )
    database.execute(  # only A's head in the bulk retry's filter
        "UPDATE executions SET created_at = now() - INTERVAL '1 hour' WHERE execution_id = :id",
        id=heads[0],
    )
    before = (datetime.now(UTC) - timedelta(minutes=30)).isoformat()
    _bulk(api, database, "retry", endpoint="redo", status=["FAILED"], created_before=before)
    assert waiting(database, [heads[0], behind[0]]) == {heads[0]: False, behind[0]: True}
    [left] = api.get("/endpoints/redo/ordering-keys").body["items"]
    assert left["key"] == "B"
    since = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    until = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    redriven = api.post("/endpoints/redo/redrive", {"since": since, "until": until})
    assert redriven.status == 200, redriven.body
    assert redriven.body["requeued"] == 1
    assert waiting(database, [heads[1], behind[1]]) == {heads[1]: False, behind[1]: True}
    assert api.get("/endpoints/redo/ordering-keys").body["items"] == []


def test_a_head_the_reclaimer_sets_aside_releases_its_key(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "aside")
    ids = [post(api, "aside", f"k{i}", "A") for i in range(2)]
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    database.execute(
        "UPDATE executions SET status = 'RUNNING', worker_id = 'gone', attempt_count = 1,"
        " started_at = :t, lease_expires_at = :t WHERE execution_id = :id",
        t=long_ago,
        id=ids[0],
    )
    StuckReclaimer(database, timeout_sec=60).set_aside(
        ids[0], "a row it cannot write", long_ago + timedelta(hours=2)
    )
    assert statuses(database, [ids[0]]) == {"FAILED": 1}
    assert waiting(database, [ids[1]]) == {ids[1]: False}


def test_a_head_that_expired_before_its_claim_ends_failed_and_releases_its_key(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    sink_endpoint(api, sink, "expiring")
    head = post(api, "expiring", "old", "A", expire_after="1s")
    behind = post(api, "expiring", "new", "A")
    database.execute(  # due an hour ago: claimed far past its expire_after
        "UPDATE executions SET run_at = now() - INTERVAL '1 hour' WHERE execution_id = :id",
        id=head,
    )
    assert settle(make_worker(), database, [head, behind]) == {"FAILED": 1, "SUCCESS": 1}
    assert statuses(database, [head]) == {"FAILED": 1}
    assert sink.order() == {"A": ["new"]}  # the expired head was never sent
