"""The delivery loop: the capacity bound (claims into free slots only), blocking dispatchers
off the loop, and what happens to an execution whose delivery crashes or is abandoned."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.domain.delivery import DeliveryOutcome, DeliveryRequest, succeeded
from chalicelib.worker.postgres import PostgresStore
from tests.support.seed.worker import attempts, claimed_execution, http_spec, seed, statuses
from tests.support.waiting import wait_for
from tests.support.worker_runs import run_until_delivered, settle

#: The claim or the wake-up decides what these tests see: make test runs them again in
#: CockroachDB's configuration (test-cockroach).
pytestmark = pytest.mark.claim_path

SPEC = http_spec("http://127.0.0.1:9/unused")


class GatedDispatcher:
    """Async dispatcher that waits for a gate and records how many ran at once."""

    def __init__(self, *, fail_for: set[str] | None = None) -> None:
        self.gate = threading.Event()
        self.running = 0
        self.peak = 0
        self.seen: list[str] = []
        self.fail_for = fail_for or set()

    async def dispatch_async(self, request: DeliveryRequest) -> DeliveryOutcome:
        self.running += 1  # only touched on the loop's thread
        self.peak = max(self.peak, self.running)
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
            self.seen.append(request.execution_id)
            if request.execution_id in self.fail_for:
                raise RuntimeError("dispatcher bug")
            return succeeded({"status_code": 200})
        finally:
            self.running -= 1

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        raise AssertionError("the worker must use dispatch_async")

    def close(self) -> None:
        pass


class BlockingDispatcher:
    """A dispatcher with only the blocking form (like Kafka's and Redis's)."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.01)
        return succeeded({"status_code": 200})

    def close(self) -> None:
        pass


def test_a_worker_claims_only_into_free_slots_the_rest_stay_queued(
    database: Database, make_worker
) -> None:
    seeded = seed(database, spec=SPEC, count=40)
    dispatcher = GatedDispatcher()
    worker = make_worker(
        worker_max_concurrent=3, worker_endpoint_share=1.0, dispatchers={"HTTP": dispatcher}
    )

    assert worker.run_once() == 3
    wait_for(lambda: dispatcher.running, "3 deliveries running", until=lambda n: n == 3)

    # RUNNING means in delivery: nothing is claimed ahead of a free slot.
    assert worker.run_once() == 0
    assert statuses(database, seeded.execution_ids) == {"RUNNING": 3, "QUEUED": 37}
    dispatcher.gate.set()
    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": 40}
    assert dispatcher.peak == 3
    assert sorted(dispatcher.seen) == sorted(seeded.execution_ids)  # each exactly once


def test_a_slot_is_held_until_the_attempt_is_recorded(database: Database, make_worker) -> None:
    """While finalize commits are stuck, a worker sends no more than its capacity (what a
    crash would redeliver, sent and not recorded, is bounded by it) and holds RUNNING at
    most one claim batch more: claimed into the slots being recorded, waiting for them."""
    seeded = seed(database, spec=SPEC, count=10)
    dispatcher = GatedDispatcher()
    dispatcher.gate.set()
    worker = make_worker(
        worker_max_concurrent=2, worker_endpoint_share=1.0, dispatchers={"HTTP": dispatcher}
    )
    locked, release = threading.Event(), threading.Event()

    def hold(tx: Transaction) -> None:
        tx.execute("LOCK TABLE attempts IN EXCLUSIVE MODE")  # finalize inserts attempts
        locked.set()
        release.wait(30)

    holder = threading.Thread(target=lambda: database.transaction(hold, name="hold"))
    holder.start()
    try:
        assert locked.wait(10)
        assert worker.run_once() == 2
        wait_for(lambda: len(dispatcher.seen), "2 sent", until=lambda n: n == 2)
        # The claimer's loop claims into the two slots being recorded, unless the record
        # itself refills them (PostgreSQL: worker_record_and_claim, stuck here with it).
        ahead = 0 if worker.store.records_with_claim else 2
        assert worker.run_once() == ahead
        for _ in range(5):
            assert worker.run_once() == 0  # no free slot, and any batch ahead waits for slots
            time.sleep(0.02)
        assert worker.in_flight == 2 + ahead
        assert len(dispatcher.seen) == 2  # sent, not recorded: no slot for more
        assert statuses(database, seeded.execution_ids) == {
            "RUNNING": 2 + ahead,
            "QUEUED": 8 - ahead,
        }
    finally:
        release.set()
        holder.join(10)
    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": 10}
    assert sorted(dispatcher.seen) == sorted(seeded.execution_ids)  # each exactly once


def test_blocking_dispatchers_run_off_the_event_loop(database: Database, make_worker) -> None:
    seeded = seed(database, spec=SPEC, count=12)
    dispatcher = BlockingDispatcher()
    worker = make_worker(worker_max_concurrent=4, dispatchers={"HTTP": dispatcher})

    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": 12}
    assert dispatcher.threads and all(n.startswith("te-delivery_") for n in dispatcher.threads)


def test_a_crashing_delivery_is_a_recorded_internal_error_and_the_rest_go_on(
    database: Database, make_worker
) -> None:
    """It may have been sent: left RUNNING, the reclaimer would send it again after every
    lease. Its attempt is recorded instead, and the retry policy decides (here: no retry)."""
    seeded = seed(database, spec=SPEC, count=6)
    broken = seeded.execution_ids[2]
    dispatcher = GatedDispatcher(fail_for={broken})
    dispatcher.gate.set()
    worker = make_worker(worker_max_concurrent=2, dispatchers={"HTTP": dispatcher})

    while worker.run_once():
        assert worker.drain(10)

    assert worker.in_flight == 0  # the crashed one left the window too
    assert statuses(database, [broken]) == {"FAILED": 1}
    [attempt] = attempts(database, broken)
    assert attempt["error"]["type"] == "INTERNAL_ERROR"
    assert "RuntimeError: dispatcher bug" in attempt["error"]["message"]
    others = [e for e in seeded.execution_ids if e != broken]
    assert statuses(database, others) == {"SUCCESS": 5}
    assert worker.counts()["succeeded"] == 5


def test_closing_with_abandon_cancels_deliveries_and_leaves_them_running(
    database: Database, make_worker
) -> None:
    seeded = seed(database, spec=SPEC, count=5)
    dispatcher = GatedDispatcher()  # the gate never opens
    worker = make_worker(
        worker_max_concurrent=5, worker_endpoint_share=1.0, dispatchers={"HTTP": dispatcher}
    )

    worker.run_once()
    wait_for(lambda: dispatcher.running, "5 deliveries running", until=lambda n: n == 5)
    assert not worker.drain(0.2)
    worker.stop()
    worker.close(abandon=True)

    assert dispatcher.running == 0  # every delivery task was cancelled
    assert worker.in_flight == 0
    assert statuses(database, seeded.execution_ids) == {"RUNNING": 5}


def test_a_finalize_batch_claims_into_the_slots_it_frees(
    database: Database, make_worker, http_target
) -> None:
    """Under load a finalize that needs a transaction (here: its executions are children of
    a batch, whose progress follows their ends) records a batch and claims as many new
    executions as it frees slots (one commit per cycle); each is delivered exactly once."""
    seeded = seed(database, spec=http_spec(http_target.url("/fast")), count=300)
    database.execute("INSERT INTO batches (batch_id, total) VALUES ('batch_refill', 300)")
    database.execute(
        "UPDATE executions SET batch_id = 'batch_refill' WHERE execution_id = ANY(:ids)",
        ids=seeded.execution_ids,
    )
    worker = make_worker(worker_max_concurrent=8, worker_endpoint_share=1.0)
    run_until_delivered(worker, database, seeded.execution_ids)
    assert worker.refills > 0
    sent = [r.headers["x-task-executor-execution-id"] for r in http_target.received("/fast")]
    assert sorted(sent) == sorted(seeded.execution_ids)  # each exactly once
    assert worker.counts()["claimed"] == 300


def test_a_batch_nothing_follows_is_recorded_and_refilled_by_one_statement(
    database: Database, make_worker, http_target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ring's usual cycle on PostgreSQL: the statement that records a batch of attempts
    (nothing follows them) also claims into the slots it frees (worker_record_and_claim),
    and the claimer's own loop leaves those slots to it. In CockroachDB's configuration the
    batch is recorded alone and the claimer claims. Either way each execution is delivered
    once and has one attempt."""
    seeded = seed(database, spec=http_spec(http_target.url("/fast")), count=300)
    worker = make_worker(worker_max_concurrent=8, worker_endpoint_share=1.0)
    combined: list[str] = []  # the threads that sent worker_record_and_claim
    run = Transaction.run

    def spy(tx: Transaction, query: Any, **params: Any) -> Any:
        if "SELECT 'claimed' AS kind" in getattr(query, "sql", query):
            combined.append(threading.current_thread().name)
        return run(tx, query, **params)

    monkeypatch.setattr(Transaction, "run", spy)
    run_until_delivered(worker, database, seeded.execution_ids)
    sent = [r.headers["x-task-executor-execution-id"] for r in http_target.received("/fast")]
    assert sorted(sent) == sorted(seeded.execution_ids)  # each exactly once
    attempts = database.run(
        "SELECT count(*) AS n, count(DISTINCT execution_id) AS e FROM attempts"
        " WHERE execution_id = ANY(:ids)",
        ids=seeded.execution_ids,
    )[0]
    assert (attempts["n"], attempts["e"]) == (300, 300)
    if worker.store.records_with_claim:
        assert combined and set(combined) <= {"te-finalizer-0", "te-finalizer-1"}
        assert worker.refills > 0
    else:
        assert combined == [] and worker.refills == 0


def test_a_refill_sized_while_another_claim_is_in_flight_gets_the_room_left(
    database: Database, make_worker
) -> None:
    """Two writers' refills side by side: the second is not turned away while the first
    one's statement runs (its batch would be recorded without a refill, and its slots
    left to a claim of their own), but sized by the room the first did not reserve, and
    every endpoint's share is smaller by the first's room. The reservation is given back
    when the first commits."""
    seeded = seed(database, spec=SPEC, count=10)
    worker = make_worker(worker_max_concurrent=8, worker_endpoint_share=1.0)
    room = worker.room
    held = [claimed_execution(f"held-{i}", "held") for i in range(3)]
    worker.ledger.take(held, time.monotonic())

    with room.refilling(lambda: False):  # as while Worker.run runs: refills are planned
        first = room.reserve_refill()  # a writer's statement in flight with this refill
        assert first is not None and (first.room, first.limits.pending) == (5, 0)
        for execution in held:  # another writer recorded these meanwhile
            worker.ledger.release(execution.execution_id, execution.attempt)
        second = room.reserve_refill()
        assert second is not None and (second.room, second.limits.pending) == (3, 5)

        store = worker.store
        assert isinstance(store, PostgresStore)
        taken = database.transaction(lambda tx: store.claim_in(tx, second))
        assert len(taken) == 3  # the endpoint's share (8) less the first refill's room (5)
        assert statuses(database, seeded.execution_ids) == {"RUNNING": 3, "QUEUED": 7}
        # Both end without holding anything (nothing is sent here): the reservations are
        # given back, whole.
        room.settle(second, [])
        room.settle(first, [])
        third = room.reserve_refill()
        assert third is not None and (third.room, third.limits.pending) == (8, 0)
        room.settle(third, [])
