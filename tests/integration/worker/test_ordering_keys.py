"""Ordering keys delivered by real workers to a real HTTP target on loopback: executions of
one endpoint sharing an ``ordering_key`` start one at a time, in the order their jobs were
created (DELAYED: by due time), the next only once the previous ended; retries hold the
key; a failed head skips or blocks its key; no key holds up another; and it holds across
two workers and a crashed worker's reclaim."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.scheduler.bulk import BulkOperator
from chalicelib.scheduler.materializer import CronMaterializer
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.services.operations import OperationService
from chalicelib.worker import Worker
from tests.conftest import ApiClient
from tests.integration.worker.conftest import settle
from tests.support.factories import register_endpoint, retry_policy
from tests.support.seed.worker import statuses
from tests.support.served import HttpTarget, Reply
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


class KeyedSink:
    """A loopback HTTP target for bodies ``{"key", "n"}``: it records, in arrival order,
    each request's key and n, and the most requests of one key it held at once; requests of
    the keys in ``hang`` wait until :meth:`release` (or the worker's timeout)."""

    def __init__(self, *, hang: frozenset[str] = frozenset()) -> None:
        self.hang = hang
        self.released = threading.Event()
        self.arrived: list[tuple[str, str]] = []
        self.most_at_once: dict[str, int] = defaultdict(int)
        self._in_flight: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sink"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def order(self) -> dict[str, list[str]]:
        """Each key's n values, in arrival order."""
        seen: dict[str, list[str]] = defaultdict(list)
        with self._lock:
            for key, n in self.arrived:
                seen[key].append(n)
        return dict(seen)

    def _serve(self, body: dict[str, Any]) -> None:
        key, n = str(body["key"]), str(body["n"])
        with self._lock:
            self.arrived.append((key, n))
            self._in_flight[key] += 1
            self.most_at_once[key] = max(self.most_at_once[key], self._in_flight[key])
        try:
            if key in self.hang:
                self.released.wait(60)
        finally:
            with self._lock:
                self._in_flight[key] -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sink._serve(json.loads(self.rfile.read(length)))
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


@pytest.fixture
def sink() -> Iterator[KeyedSink]:
    target = KeyedSink()
    yield target
    target.close()


def sink_endpoint(api: ApiClient, target: KeyedSink, name: str, **extra: Any) -> None:
    spec = {"url": target.url(), "method": "POST", "expected_status_codes": [200]}
    spec.update(extra.pop("spec", {}))
    register_endpoint(api, name, spec=spec, **extra)


def batch(api: ApiClient, endpoint: str, items: list[tuple[str, str | None]]) -> list[str]:
    """POST /jobs/batch of IMMEDIATE jobs (idempotency key, ordering key); their execution
    ids, in order."""
    jobs = []
    for key, ordering_key in items:
        job: dict[str, Any] = {
            "endpoint": endpoint,
            "trigger": "IMMEDIATE",
            "idempotency_key": key,
            "input": {"key": ordering_key or "-", "n": key},
        }
        if ordering_key is not None:
            job["ordering_key"] = ordering_key
        jobs.append(job)
    reply = api.post("/jobs/batch", {"jobs": jobs})
    assert reply.status == 200, reply.body
    assert {item["status"] for item in reply.body["items"]} == {201}
    return [str(item["job"]["execution"]["execution_id"]) for item in reply.body["items"]]


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
