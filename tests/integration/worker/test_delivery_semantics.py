"""Delivery semantics under slow and hung targets, against real HTTP targets.

RUNNING means in flight; attempt times measure the delivery; a live worker keeps its lease
and sends nothing it no longer owns; one hung endpoint cannot starve the others, with one
worker or two; one attempt is one send.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.scheduler.reclaimer import StuckReclaimer
from chalicelib.worker import Worker
from tests.support.seed.worker import (
    attempts,
    create_config,
    execution,
    http_spec,
    retry_policy,
    seed,
    statuses,
)
from tests.support.served import HttpTarget, Reply
from tests.support.waiting import wait_for

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

EXECUTION = "x-task-executor-execution-id"
ATTEMPT = "x-task-executor-attempt"


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    """Workers running in threads; abandoned (hung deliveries cancelled) at the end."""
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for worker in workers:
            worker.close(abandon=True)


def running_by_worker(db: Database, ids: list[str]) -> Counter[str]:
    rows = db.run(
        "SELECT worker_id, count(*) AS n FROM executions "
        "WHERE execution_id = ANY(CAST(:ids AS TEXT[])) AND status = 'RUNNING' "
        "GROUP BY worker_id",
        ids=ids,
    )
    return Counter({r["worker_id"]: int(r["n"]) for r in rows})


def most_overlapping(intervals: list[tuple[datetime, datetime]]) -> int:
    """The largest number of (start, end) intervals open at one instant (ends first on ties:
    a slot freed and taken again at the same instant is not two at once)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = peak = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak


# -- 1. RUNNING means in flight; attempt times measure the delivery ------------------------


def test_running_means_in_flight_and_attempt_times_measure_the_delivery(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """A slow target (2 s), 12 executions, 4 slots: each execution is sent within moments
    of its claim (the old claim-ahead window held some RUNNING for a whole delivery), what
    the worker cannot start stays QUEUED, and the attempt's times are the request's."""
    delay = 2.0
    http_target.script("/slow", Reply(delay=delay))
    seeded = seed(database, spec=http_spec(http_target.url("/slow"), timeout_ms=10000), count=12)
    worker = make_worker(worker_max_concurrent=4, worker_endpoint_share=1.0)
    peak_running = 0

    def all_delivered() -> dict[str, int]:
        nonlocal peak_running
        counts = statuses(database, seeded.execution_ids)
        peak_running = max(peak_running, counts.get("RUNNING", 0))
        return counts

    with running(worker):
        wait_for(all_delivered, "12 delivered", until=lambda c: c.get("SUCCESS", 0) == 12)

    # The capacity, plus at most one claim batch claimed into slots being recorded.
    assert 4 <= peak_running <= 8
    received = {r.headers[EXECUTION]: r.at for r in http_target.received("/slow")}
    sends = {e: attempts(database, e)[0] for e in seeded.execution_ids}
    # The shortest delivery the database recorded: held for one, a claim would wait this long.
    shortest = min(a["completed_at"] - a["started_at"] for a in sends.values())
    for execution_id, attempt in sends.items():
        claimed_at = execution(database, execution_id)["started_at"]
        # Sent on its claim: before any delivery it could have waited for would have ended
        # (the old claim-ahead window held some RUNNING for a whole delivery).
        assert claimed_at <= attempt["started_at"] < claimed_at + shortest
        # The attempt spans the request the target saw (a claim-time started_at would start
        # a whole delivery before it) and lasts at least the target's hold.
        assert attempt["started_at"].timestamp() <= received[execution_id]
        assert received[execution_id] <= attempt["completed_at"].timestamp()
        assert attempt["duration_ms"] >= delay * 1000
    # Attempt times are the sends: never more open at once than the 4 delivery slots.
    assert most_overlapping([(a["started_at"], a["completed_at"]) for a in sends.values()]) == 4


# -- 2. a live worker keeps its lease; a worker that lost it does not send ----------------


def test_a_delivery_longer_than_the_lease_is_not_reclaimed(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/long", Reply(delay=3.5))
    spec = http_spec(http_target.url("/long"), timeout_ms=10000)
    seeded = seed(database, spec=spec, count=2, policy=retry_policy(max_attempts=3))
    worker = make_worker(stuck_execution_timeout_sec=1, worker_endpoint_share=1.0)
    reclaimer = StuckReclaimer(database, timeout_sec=1)

    def delivered_unreclaimed() -> dict[str, int]:
        assert reclaimer.reclaim() == []
        return statuses(database, seeded.execution_ids)

    with running(worker):
        wait_for(
            delivered_unreclaimed,
            "both delivered, never reclaimed",
            until=lambda c: c.get("SUCCESS", 0) == 2,
            interval=0.1,
        )

    sent = Counter(r.headers[EXECUTION] for r in http_target.received("/long"))
    assert sent == dict.fromkeys(seeded.execution_ids, 1)
    for execution_id in seeded.execution_ids:
        assert [a["status"] for a in attempts(database, execution_id)] == ["SUCCESS"]


def test_a_worker_that_lost_its_lease_before_the_send_does_not_send(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """Between claim and send the worker is held up (its config read waits on a lock) and
    the execution is reclaimed meanwhile (its lease forced to expire, as in a partition).
    The worker's next renewal finds it gone: attempt 1 is never sent, the target sees
    attempt 2 only, and the history shows the lost attempt."""
    create_config(database, "cfg-lease", {"path": "x"})
    spec = http_spec(http_target.url("/{{config.path}}"), timeout_ms=2000)
    seeded = seed(database, spec=spec, config_ref="cfg-lease", policy=retry_policy(max_attempts=3))
    worker = make_worker(stuck_execution_timeout_sec=1)
    locked, release = threading.Event(), threading.Event()

    def hold(tx: Transaction) -> None:
        tx.execute("LOCK TABLE configs IN ACCESS EXCLUSIVE MODE")
        locked.set()
        release.wait(30)

    holder = threading.Thread(target=lambda: database.transaction(hold, name="hold"))
    holder.start()
    assert locked.wait(10)
    claiming = threading.Thread(target=worker.run_once)
    claiming.start()
    try:
        wait_for(
            lambda: statuses(database, seeded.execution_ids),
            "the claim",
            until=lambda c: c == {"RUNNING": 1},
        )
        database.run(
            "UPDATE executions SET lease_expires_at = now() - INTERVAL '1 second' "
            "WHERE execution_id = :id",
            id=seeded.execution_id,
        )
        reclaimed = StuckReclaimer(database, timeout_sec=1).reclaim()
        assert [r.execution_id for r in reclaimed] == [seeded.execution_id]
        time.sleep(0.8)  # renewal rounds run meanwhile (every lease / 12)
    finally:
        release.set()
        holder.join(10)
        claiming.join(10)
    assert worker.drain(10)
    assert http_target.received() == []  # attempt 1 was not sent

    wait_for(lambda: worker.run_once() > 0 and worker.drain(10), "the retry claimed and sent")
    assert [r.headers[ATTEMPT] for r in http_target.received("/x")] == ["2"]
    history = [
        (a["status"], (a["error"] or {}).get("type"))
        for a in attempts(database, seeded.execution_id)
    ]
    assert history == [("FAILED", "WORKER_LOST"), ("SUCCESS", None)]


def test_a_killed_workers_executions_are_reclaimed_one_lease_after_its_last_renewal(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/hang", Reply(delay=30))
    spec = http_spec(http_target.url("/hang"), timeout_ms=60000)
    seeded = seed(database, spec=spec, count=2, policy=retry_policy(max_attempts=2))
    worker = make_worker(stuck_execution_timeout_sec=1, worker_endpoint_share=1.0)
    reclaimer = StuckReclaimer(database, timeout_sec=1)

    stop = threading.Event()
    poller = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    poller.start()
    reclaimed: list[str] = []
    try:
        wait_for(lambda: len(http_target.received("/hang")), "2 sent", until=lambda n: n == 2)
        time.sleep(1.5)  # the scenario: longer than the lease, so only renewals keep it held
        assert reclaimer.reclaim() == []
        stop.set()  # as if the worker died: no claims ...
        poller.join(10)
        worker.leases.stop()  # ... and no renewals from now on
        [lease] = database.run(
            "SELECT max(lease_expires_at) AS expires, now() AS now FROM executions "
            "WHERE execution_id = ANY(CAST(:ids AS TEXT[]))",
            ids=seeded.execution_ids,
        )
        # The last renewal held them at most one lease (1 s) past the worker's end ...
        assert lease["now"] < lease["expires"] <= lease["now"] + timedelta(seconds=1)

        def all_reclaimed() -> int:
            reclaimed.extend(r.execution_id for r in reclaimer.reclaim())
            return len(reclaimed)

        # ... and the reclaimer takes them once it has passed (the timeout only guards).
        wait_for(all_reclaimed, "both reclaimed", until=lambda n: n == 2)
    finally:
        worker.close(abandon=True)
    assert sorted(reclaimed) == sorted(seeded.execution_ids)


# -- 3. per-endpoint fairness; a full worker does not claim --------------------------------


def test_a_hung_endpoint_takes_all_but_the_reserve_and_healthy_ones_are_delivered_on_time(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/hang", Reply(delay=30))
    hung = seed(database, spec=http_spec(http_target.url("/hang"), timeout_ms=60000), count=20)
    # Alone, /hang may take every slot but the reserve (3 of 4); the healthy endpoint's
    # work then gets the reserve at once, and /hang nothing more (its share is 2).
    worker = make_worker(worker_max_concurrent=4)

    with running(worker):
        wait_for(lambda: len(http_target.received("/hang")), "3 hung", until=lambda n: n == 3)
        healthy = seed(database, spec=http_spec(http_target.url("/ok")), count=10)
        # The wait's 20 s guard is shorter than the 30 s hang: the healthy work cannot have
        # waited for a hung slot to free.
        wait_for(
            lambda: statuses(database, healthy.execution_ids),
            "the healthy endpoint delivered",
            until=lambda c: c == {"SUCCESS": 10},
        )
        # Every healthy execution was delivered while the hung ones still held their slots.
        assert running_by_worker(database, hung.execution_ids) == {worker.worker_id: 3}

    assert len(http_target.received("/hang")) == 3


def test_three_hung_endpoints_leave_the_reserve_to_a_fourth(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    """Three endpoints whose targets hang (40 due each) hold every slot but the reserve
    and a slice of it each, never all 50: a fourth endpoint's work is delivered while
    they still hang, not when their 60 s timeouts free a slot."""
    hung_ids: list[str] = []
    for path in ("/hang1", "/hang2", "/hang3"):
        http_target.script(path, Reply(delay=30))
        spec = http_spec(http_target.url(path), timeout_ms=60000)
        hung_ids += seed(database, spec=spec, count=40).execution_ids
    worker = make_worker(worker_max_concurrent=50)

    def hung_sent() -> int:
        return sum(len(http_target.received(p)) for p in ("/hang1", "/hang2", "/hang3"))

    with running(worker):
        # 40 for the first (all but the reserve of 10), a slice of 2 for each of the others.
        wait_for(hung_sent, "the hung endpoints' sends", until=lambda n: n >= 44)
        healthy = seed(database, spec=http_spec(http_target.url("/ok")), count=5)
        wait_for(  # its 20 s guard is shorter than the 30 s hang
            lambda: statuses(database, healthy.execution_ids),
            "the fourth endpoint delivered",
            until=lambda c: c == {"SUCCESS": 5},
        )
        assert running_by_worker(database, hung_ids) == {worker.worker_id: 44}
    assert hung_sent() == 44


def test_with_two_workers_each_keeps_its_reserve_from_a_hung_endpoint(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/hang", Reply(delay=30))
    hung = seed(database, spec=http_spec(http_target.url("/hang"), timeout_ms=60000), count=20)
    workers = [make_worker(worker_id=f"w{i}", worker_max_concurrent=4) for i in range(2)]

    with running(*workers):
        # 3 each: all but the reserve.
        wait_for(lambda: len(http_target.received("/hang")), "6 hung", until=lambda n: n == 6)
        healthy = seed(database, spec=http_spec(http_target.url("/ok")), count=10)
        wait_for(  # its 20 s guard is shorter than the 30 s hang
            lambda: statuses(database, healthy.execution_ids),
            "the healthy endpoint delivered",
            until=lambda c: c == {"SUCCESS": 10},
        )
        # Delivered through each worker's reserve while the hung ones still held the rest.
        assert running_by_worker(database, hung.execution_ids) == {"w0": 3, "w1": 3}


def test_a_worker_with_every_slot_busy_stops_claiming_and_an_idle_one_takes_the_work(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    http_target.script("/hang", Reply(delay=30))
    hung = seed(database, spec=http_spec(http_target.url("/hang"), timeout_ms=60000), count=3)
    busy = make_worker(worker_id="busy", worker_max_concurrent=2, worker_endpoint_share=1.0)

    with running(busy):
        wait_for(lambda: len(http_target.received("/hang")), "2 hung", until=lambda n: n == 2)
        healthy = seed(database, spec=http_spec(http_target.url("/ok")), count=5)
        time.sleep(0.5)  # the scenario: the saturated worker polls meanwhile (and must not claim)
        assert statuses(database, healthy.execution_ids) == {"QUEUED": 5}
        assert statuses(database, hung.execution_ids) == {"RUNNING": 2, "QUEUED": 1}
        idle = make_worker(worker_id="idle", worker_max_concurrent=4)
        with running(idle):
            wait_for(
                lambda: statuses(database, healthy.execution_ids),
                "the idle worker to deliver",
                until=lambda c: c == {"SUCCESS": 5},
            )

    owners = {execution(database, e)["worker_id"] for e in healthy.execution_ids}
    assert owners == {"idle"}


# -- 4. one attempt, one send ---------------------------------------------------------------


class ClosingTarget:
    """Answers the first request of each connection with 200 and keeps the connection;
    reads the second one and closes without answering (the server died mid-request)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str]] = []  # (execution id, attempt)
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/once"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            for n in range(2):
                head = self._read_request(reader)
                if head is None:
                    return
                if n == 0:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def _read_request(self, reader: object) -> dict[str, str] | None:
        headers: dict[str, str] = {}
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return None
        while (line := reader.readline()) not in (b"\r\n", b""):  # type: ignore[attr-defined]
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        reader.read(int(headers.get("content-length", 0)))  # type: ignore[attr-defined]
        self.received.append((headers[EXECUTION], headers[ATTEMPT]))
        return headers

    def close(self) -> None:
        self._sock.close()


def test_a_request_that_reached_the_target_is_not_sent_again_under_the_same_attempt(
    database: Database, make_worker
) -> None:
    target = ClosingTarget()
    try:
        spec = http_spec(target.url())
        seeded = seed(database, spec=spec, count=4, policy=retry_policy(max_attempts=3))
        worker = make_worker(worker_max_concurrent=1)
        for _ in range(20):
            worker.run_once()
            worker.drain(10)
            if statuses(database, seeded.execution_ids) == {"SUCCESS": 4}:
                break
    finally:
        target.close()

    assert statuses(database, seeded.execution_ids) == {"SUCCESS": 4}
    assert len(target.received) == len(set(target.received))  # no (execution, attempt) twice
    recorded = sum(len(attempts(database, e)) for e in seeded.execution_ids)
    assert recorded == len(target.received)  # every send has its attempt
    errors = [
        (a["error"] or {}).get("type")
        for e in seeded.execution_ids
        for a in attempts(database, e)
        if a["status"] == "FAILED"
    ]
    assert errors and set(errors) == {"CONNECTION_ERROR"}
