"""Ordering keys delivered by real workers to real HTTP targets on loopback: executions of
one endpoint sharing an ``ordering_key`` start one at a time, in the order their jobs were
created (DELAYED and CRON: by due time), the next only once the previous ended, across two
workers, a restart and creations racing releases; retries hold the key."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.materializer import CronMaterializer
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint, retry_policy
from tests.support.ordering import (
    KeyedSink,
    arrivals,
    batch,
    by_key,
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


def test_many_keys_keep_their_order_across_two_workers_and_a_restart(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """20 keys of 10 jobs, created interleaved in batches, delivered by two workers (one of
    them replaced by a new worker halfway: a restart): each key's jobs arrive in the order
    they were created, never two of one key at once."""
    sink_endpoint(api, sink, "orders")
    ids: list[str] = []
    expected: dict[str, list[str]] = defaultdict(list)
    for round_ in range(10):
        items = [(f"r{round_}-k{k}", f"key-{k}") for k in range(20)]
        ids += batch(api, "orders", items)
        for key, ordering_key in items:
            expected[ordering_key].append(key)
    first, second = make_worker(worker_id="w-a"), make_worker(worker_id="w-b")
    with running(first, second):
        wait_for(
            lambda: statuses(database, ids).get("SUCCESS", 0),
            "half delivered",
            until=lambda n: n >= len(ids) // 2,
            timeout=60,
        )
    with running(make_worker(worker_id="w-c"), second):  # w-a restarted as w-c
        delivered(database, ids)
    assert statuses(database, ids) == {"SUCCESS": len(ids)}
    assert sink.order() == dict(expected)
    assert set(sink.most_at_once.values()) == {1}


def test_jobs_without_a_key_never_wait_and_keys_of_other_endpoints_are_apart(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """A key is per endpoint: the same key on two endpoints is two keys, each with its head
    claimable; a job without a key is claimable at once."""
    sink_endpoint(api, sink, "one")
    sink_endpoint(api, sink, "two")
    a = [post(api, "one", f"a{i}", "shared") for i in range(2)]
    b = [post(api, "two", f"b{i}", "shared") for i in range(2)]
    free = post(api, "one", "free", None)
    assert waiting(database, [*a, *b, free]) == {
        a[0]: False,
        a[1]: True,
        b[0]: False,
        b[1]: True,
        free: False,
    }


def test_jobs_created_while_workers_release_their_keys_are_neither_lost_nor_doubled(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """Four clients post jobs on two keys one after another while two workers deliver and
    release those keys: creations and releases race on the same keys (SERIALIZABLE
    creations, READ COMMITTED finalizes). Every job is delivered once, never two of a key
    at once, and each client's jobs in the order it posted them."""
    sink_endpoint(api, sink, "racing")
    api.threadsafe()  # four threads call it at once
    posted: dict[int, list[str]] = {}
    failures: list[BaseException] = []

    def client(number: int) -> None:
        try:
            posted[number] = []
            for i in range(15):
                key = f"c{number}-{i}"
                post(api, "racing", key, f"shared-{number % 2}")
                posted[number].append(key)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    with running(make_worker(worker_id="w-a"), make_worker(worker_id="w-b")):
        clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(120)
        assert not failures, failures
        ids = [r["execution_id"] for r in database.run("SELECT execution_id FROM executions")]
        assert len(ids) == 60
        delivered(database, ids)
    order = sink.order()
    assert sorted(n for key in order.values() for n in key) == sorted(
        k for keys in posted.values() for k in keys
    )  # each once
    for number, keys in posted.items():
        arrived = [n for n in order[f"shared-{number % 2}"] if n.startswith(f"c{number}-")]
        assert arrived == keys
    assert set(sink.most_at_once.values()) == {1}


# -- DELAYED: by due time, then creation ----------------------------------------------------


def test_an_execution_due_earlier_takes_the_place_of_a_head_that_has_not_started(
    api: ApiClient, database: Database
) -> None:
    register_endpoint(api, "later")
    later = datetime.now(UTC) + timedelta(hours=2)
    sooner = datetime.now(UTC) + timedelta(hours=1)
    body = {"endpoint": "later", "trigger": "DELAYED", "ordering_key": "k"}
    far = api.post("/jobs", {**body, "idempotency_key": "far", "run_at": later.isoformat()})
    near = api.post("/jobs", {**body, "idempotency_key": "near", "run_at": sooner.isoformat()})
    far_id = far.body["execution"]["execution_id"]
    near_id = near.body["execution"]["execution_id"]
    assert waiting(database, [far_id, near_id]) == {far_id: True, near_id: False}
    now = post(api, "later", "now", "k")  # IMMEDIATE: due now, before both
    assert waiting(database, [far_id, near_id, now]) == {far_id: True, near_id: True, now: False}
    # Rescheduled past the other: its new time is its new place.
    moved = api.put(f"/jobs/{near.body['job_id']}", {"delay": "3h"})
    assert moved.status == 200, moved.body
    assert waiting(database, [far_id, near_id, now]) == {far_id: True, near_id: True, now: False}
    api.post(f"/executions/{now}/cancel")
    assert waiting(database, [far_id, near_id]) == {far_id: False, near_id: True}


def test_a_head_that_started_holds_its_key_against_one_due_earlier(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """A RETRYING head (an attempt made, its backoff not over) keeps the key: a job created
    after it never overtakes it, whatever its due time."""
    policy = retry_policy(max_attempts=2, initial_delay_ms=3_600_000, max_delay_ms=3_600_000)
    sink_endpoint(api, sink, "held", retry_policy=policy, spec={"expected_status_codes": [201]})
    head = post(api, "held", "h", "k")
    settle_one = make_worker()
    settle_one.run_once()
    settle_one.drain(10)
    assert statuses(database, [head]) == {"RETRYING": 1}
    behind = post(api, "held", "b", "k")
    assert waiting(database, [head, behind]) == {head: False, behind: True}
    settle_one.run_once()
    settle_one.drain(10)
    assert statuses(database, [behind]) == {"QUEUED": 1}
    assert sink.order() == {"k": ["h"]}


# -- retries hold the key -----------------------------------------------------------------


def test_retries_hold_the_key_until_the_head_ends(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    policy = retry_policy(max_attempts=3, initial_delay_ms=200)
    hook(api, http_target, "flaky", retry_policy=policy)
    http_target.script("/flaky", Reply(503), Reply(503), Reply(200))
    ids = [post(api, "flaky", f"k{i}", "A") for i in range(3)]
    assert settle(make_worker(), database, ids) == {"SUCCESS": 3}
    assert [b["n"] for b in arrivals(http_target, "/flaky")] == ["k0", "k0", "k0", "k1", "k2"]


# -- CRON: each tick by its due time ------------------------------------------------------


def test_a_cron_jobs_ticks_and_runs_now_share_its_key_in_due_order(
    api: ApiClient, database: Database, make_worker: Any, sink: KeyedSink
) -> None:
    """A keyed cron job: a run now is due now and goes first; a tick materialized ahead
    waits at its tick behind it; a new version keeps the key; the pause that cancels the
    tick leaves the key to the rest."""
    sink_endpoint(api, sink, "ticks")
    body = {
        "endpoint": "ticks",
        "trigger": "CRON",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "ordering_key": "c",
        "input": {"key": "c", "n": "cron"},
    }
    created = api.post("/jobs", body)
    assert created.status == 201, created.body
    assert created.body["ordering_key"] == "c"
    replaced = api.put(f"/jobs/{created.body['job_id']}", {"cron": "0 10 * * *"}).body
    assert replaced["ordering_key"] == "c"
    job_id = replaced["job_id"]
    ahead = datetime.now(UTC) + timedelta(days=2)
    CronMaterializer(database, clock=lambda: ahead).run_once()
    ticks = [
        r["execution_id"]
        for r in database.run(
            "SELECT execution_id FROM executions WHERE job_id = :j ORDER BY run_at", j=job_id
        )
    ]
    assert len(ticks) >= 2
    assert waiting(database, ticks) == {t: t != ticks[0] for t in ticks}  # the first is head
    first = api.post(f"/jobs/{job_id}/trigger")
    assert first.status == 201, first.body
    run_now = first.body["execution_id"]
    # Due now, before every tick, none of which has started: it takes the key's head.
    assert waiting(database, [*ticks, run_now]) == {**{t: True for t in ticks}, run_now: False}
    assert settle(make_worker(), database, [run_now]) == {"SUCCESS": 1}
    assert waiting(database, ticks) == {t: t != ticks[0] for t in ticks}  # released at its end
    assert api.post(f"/jobs/{job_id}/pause").status == 200  # cancels the ticks ahead
    assert statuses(database, ticks) == {"CANCELLED": len(ticks)}
    second = api.post(f"/jobs/{job_id}/trigger").body["execution_id"]
    assert waiting(database, [second]) == {second: False}  # nothing ahead of it any more
    assert sink.order() == {"c": ["cron"]}
