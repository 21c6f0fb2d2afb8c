"""Concurrency keys delivered by real workers to a real HTTP target on loopback: at most
``flow_control.max_concurrency_per_key`` executions of one key run at once across
workers, keys take turns, and every end, cancel, retry, reclaim and endpoint change keeps
each key's room right.

The sink records the order requests arrive in and the most of one key it held at once;
nothing is judged by time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.reclaimer import StuckReclaimer
from tests.support.api_client import ApiClient
from tests.support.concurrency import batch, gate, limited_endpoint, post, released
from tests.support.factories import retry_policy
from tests.support.ordering import KeyedSink, delivered, running
from tests.support.seed.worker import statuses
from tests.support.waiting import wait_for
from tests.support.worker_runs import settle

#: The claim decides what these tests see: make test runs them again in CockroachDB's
#: configuration (test-cockroach).
pytestmark = pytest.mark.claim_path


@pytest.fixture
def sink() -> Iterator[KeyedSink]:
    target = KeyedSink(hold=0.05)
    yield target
    target.close()


# -- the limit across workers, and turns ---------------------------------------------------


def test_two_workers_never_run_more_than_the_limit_of_one_key(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """Limit 2, three keys of 12 jobs each and 12 jobs without a key, delivered by two
    workers, half of them created while the workers run (creations racing the releases of
    ends on the same keys): the sink never holds more than 2 of a key at once, and
    everything ends."""
    limited_endpoint(api, sink, "tenants", 2)
    items = [(f"r{r}-{k}", k) for r in range(12) for k in ("a", "b", "c")]
    ids = batch(api, "tenants", [*items[:18], *((f"free{i}", None) for i in range(12))])
    with running(make_worker(worker_id="w-1"), make_worker(worker_id="w-2")):
        for start in range(18, 36, 3):  # one round of the three keys per request
            ids += batch(api, "tenants", items[start : start + 3])
        delivered(database, ids)
    assert statuses(database, ids) == {"SUCCESS": len(ids)}
    most = dict(sink.most_at_once)
    assert {k: most[k] <= 2 for k in ("a", "b", "c")} == {"a": True, "b": True, "c": True}
    assert sorted(n for k, n in sink.arrived if k != "-") == sorted(n for n, _ in items)


def test_keys_take_turns_a_big_key_does_not_hold_up_the_small_ones(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    """2,000 due executions of one key, then 20 keys of 10, limit 5, one worker with its
    default concurrency: every small key's execution starts before the big key's 200th."""
    sink = KeyedSink()
    try:
        limited_endpoint(api, sink, "turns", 5)
        big = batch(api, "turns", [(f"big{i}", "big") for i in range(2000)])
        small = batch(
            api, "turns", [(f"s{k}-{i}", f"small{k}") for i in range(10) for k in range(20)]
        )
        with running(make_worker()):
            delivered(database, small, timeout=120)
            wait_for(
                lambda: len(sink.arrived),
                "200 of the big key",
                until=lambda n: n >= 400,
                timeout=120,
            )
        order = [key for key, _ in sink.arrived]
        big_200th = [i for i, key in enumerate(order) if key == "big"][199]
        last_small = max(i for i, key in enumerate(order) if key != "big")
        assert last_small < big_200th, (last_small, big_200th)
        assert len(big) == 2000
    finally:
        sink.close()


def test_an_endpoint_limited_per_key_only_goes_through_the_metered_claim(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """flow_control with only max_concurrency_per_key: the endpoint is flow-controlled
    (its jobs without a key too), and its jobs are delivered."""
    limited_endpoint(api, sink, "metered", 1)
    rows = database.run("SELECT endpoint FROM endpoint_flow WHERE endpoint = 'metered'")
    assert rows == [{"endpoint": "metered"}]  # what the metered claim locks
    ids = [post(api, "metered", f"k{i}", "a") for i in range(3)]
    ids.append(post(api, "metered", "free", None))
    assert settle(make_worker(), database, ids) == {"SUCCESS": 4}
    assert [n for key, n in sink.arrived if key == "a"] == ["k0", "k1", "k2"]


# -- ends and re-queues keep the room right --------------------------------------------------


def test_cancelling_a_queued_or_retrying_execution_releases_the_next(
    api: ApiClient, database: Database, sink: KeyedSink
) -> None:
    limited_endpoint(api, sink, "cancels", 1)
    ids = [post(api, "cancels", f"k{i}", "a") for i in range(3)]
    assert released(database, ids) == {ids[0]}
    assert api.post(f"/executions/{ids[0]}/cancel").status == 200  # QUEUED
    assert released(database, ids[1:]) == {ids[1]}
    database.execute(  # in its backoff after a failed attempt: it holds the room
        "UPDATE executions SET status = 'RETRYING', attempt_count = 1,"
        " run_at = now() + INTERVAL '1 hour' WHERE execution_id = :id",
        id=ids[1],
    )
    assert released(database, [ids[2]]) == set()
    assert api.post(f"/executions/{ids[1]}/cancel").status == 200  # RETRYING
    assert released(database, [ids[2]]) == {ids[2]}


def test_a_retry_holds_the_room_and_a_dead_letter_retry_queues_for_a_turn(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    """A failed attempt with a retry left keeps its key's room through its backoff; once it
    ends FAILED the next starts; retried from the dead letters it queues for a turn at its
    place again."""
    sink = KeyedSink(hang=frozenset({"hang"}))  # the first job's target times out
    try:
        hour = 3_600_000
        policy = retry_policy(max_attempts=2, initial_delay_ms=hour, max_delay_ms=hour)
        limited_endpoint(api, sink, "retries", 1, retry_policy=policy, spec={"timeout_ms": 500})
        ids = [
            post(api, "retries", "k0", "a", input={"key": "hang", "n": "k0"}),
            post(api, "retries", "k1", "a"),
        ]
        worker = make_worker()
        worker.run_once()
        worker.drain(10)
        wait_for(
            lambda: statuses(database, ids[:1]), "retrying", until=lambda c: c == {"RETRYING": 1}
        )
        assert released(database, ids) == {ids[0]}  # the backoff holds the room
        database.execute(  # its backoff is over; its last attempt fails too
            "UPDATE executions SET run_at = now() WHERE execution_id = :id", id=ids[0]
        )
        assert settle(worker, database, ids[:1]) == {"FAILED": 1}
        assert released(database, ids[1:]) == {ids[1]}
        sink.hang = frozenset()
        sink.release()
        retried = api.post(f"/executions/{ids[0]}/retry")
        assert retried.status == 200, retried.body
        # Back at its place, before the one holding the room that has not started: the
        # two swap, and the key still runs one at a time.
        assert gate(database, ids) == {ids[0]: ("a", False), ids[1]: ("a", True)}
        assert settle(worker, database, ids) == {"SUCCESS": 2}
    finally:
        sink.close()


def test_a_crashed_workers_execution_is_reclaimed_and_keeps_its_room(
    api: ApiClient, database: Database, make_worker: Any
) -> None:
    sink = KeyedSink(hang=frozenset({"a"}))
    try:
        limited_endpoint(api, sink, "crash", 1, retry_policy=retry_policy(max_attempts=3))
        ids = [post(api, "crash", f"k{i}", "a") for i in range(2)]
        make_worker(worker_id="w-crashed").run_once()
        wait_for(lambda: sink.order(), "the first sent", until=lambda o: o == {"a": ["k0"]})
        database.execute(  # its lease ran out: it renews no more
            "UPDATE executions SET lease_expires_at = :t WHERE execution_id = :id",
            t=datetime.now(UTC) - timedelta(hours=1),
            id=ids[0],
        )
        [reclaimed] = StuckReclaimer(database, timeout_sec=60).reclaim()
        assert reclaimed.status == "RETRYING"
        assert released(database, ids) == {ids[0]}
        sink.hang = frozenset()
        sink.release()
        assert settle(make_worker(worker_id="w-b"), database, ids) == {"SUCCESS": 2}
        assert sink.order() == {"a": ["k0", "k0", "k1"]}
    finally:
        sink.close()


def test_an_immediate_job_displaces_a_delayed_one_holding_the_room(
    api: ApiClient, database: Database, sink: KeyedSink
) -> None:
    limited_endpoint(api, sink, "later", 1)
    in_an_hour = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    delayed = post(api, "later", "d", "a", trigger="DELAYED", run_at=in_an_hour)
    assert released(database, [delayed]) == {delayed}  # the room was free
    now = post(api, "later", "n", "a")
    assert released(database, [delayed, now]) == {now}
    ended = api.post(f"/executions/{now}/cancel")
    assert ended.status == 200
    assert released(database, [delayed]) == {delayed}


def test_removing_the_limit_lets_the_waiting_executions_go_at_the_keys_next_end(
    api: ApiClient, database: Database, sink: KeyedSink
) -> None:
    limited_endpoint(api, sink, "lifted", 1)
    ids = [post(api, "lifted", f"k{i}", "a") for i in range(4)]
    assert released(database, ids) == {ids[0]}
    shown = api.get("/endpoints/lifted").body
    body = {"type": shown["type"], "spec": shown["spec"]}
    assert api.put("/endpoints/lifted", body).status == 200
    assert released(database, ids) == {ids[0]}  # nothing moves until the key settles
    assert api.post(f"/executions/{ids[0]}/cancel").status == 200
    assert released(database, ids[1:]) == set(ids[1:])
