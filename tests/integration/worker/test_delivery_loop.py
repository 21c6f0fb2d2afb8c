"""The delivery loop: the capacity bound, the claim window, off-loop blocking dispatchers,
and what happens to an execution when its delivery crashes or is abandoned."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from chalicelib.db.connection import Database, Transaction
from chalicelib.domain.delivery import DeliveryOutcome, DeliveryRequest, succeeded
from chalicelib.worker.poller import AHEAD_FACTOR, WINDOW_FACTOR
from tests.integration.worker.conftest import settle
from tests.integration.worker.factories import http_spec, seed, statuses

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


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_deliveries_in_flight_never_exceed_capacity_while_the_window_claims_ahead(
    database: Database, make_worker
) -> None:
    seeded = seed(database, spec=SPEC, count=40)
    dispatcher = GatedDispatcher()
    worker = make_worker(worker_max_concurrent=3, dispatchers={"HTTP": dispatcher})

    claimed = worker.run_once()
    wait_until(lambda: dispatcher.running == 3)

    # Claimed ahead: more executions RUNNING than delivery slots, but only so many.
    assert claimed == AHEAD_FACTOR * 3 and claimed > 3
    assert worker.run_once() == 0  # nothing delivered yet: no room to claim more
    assert statuses(database, seeded.execution_ids)["RUNNING"] == claimed
    dispatcher.gate.set()
    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": 40}
    assert dispatcher.peak == 3
    assert sorted(dispatcher.seen) == sorted(seeded.execution_ids)  # each exactly once


def test_finalize_backlog_is_bounded_by_the_window(database: Database, make_worker) -> None:
    """While finalize commits are stuck, deliveries go on until the window is full."""
    seeded = seed(database, spec=SPEC, count=WINDOW_FACTOR * 2 + 10)
    dispatcher = GatedDispatcher()
    dispatcher.gate.set()
    worker = make_worker(worker_max_concurrent=2, dispatchers={"HTTP": dispatcher})
    locked, release = threading.Event(), threading.Event()

    def hold(tx: Transaction) -> None:
        tx.execute("LOCK TABLE attempts IN EXCLUSIVE MODE")  # finalize inserts attempts
        locked.set()
        release.wait(30)

    holder = threading.Thread(target=lambda: database.transaction(hold, name="hold"))
    holder.start()
    try:
        assert locked.wait(10)
        deadline = time.monotonic() + 10
        while worker.in_flight < WINDOW_FACTOR * 2 and time.monotonic() < deadline:
            worker.run_once()
            time.sleep(0.01)
        worker.run_once()
        assert worker.in_flight == WINDOW_FACTOR * 2
        assert len(dispatcher.seen) == WINDOW_FACTOR * 2  # all delivered, none recorded
        assert statuses(database, seeded.execution_ids)["RUNNING"] == WINDOW_FACTOR * 2
    finally:
        release.set()
        holder.join(10)
    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": WINDOW_FACTOR * 2 + 10}


def test_blocking_dispatchers_run_off_the_event_loop(database: Database, make_worker) -> None:
    seeded = seed(database, spec=SPEC, count=12)
    dispatcher = BlockingDispatcher()
    worker = make_worker(worker_max_concurrent=4, dispatchers={"HTTP": dispatcher})

    assert settle(worker, database, seeded.execution_ids) == {"SUCCESS": 12}
    assert dispatcher.threads and all(n.startswith("te-delivery_") for n in dispatcher.threads)


def test_a_crashing_delivery_leaves_its_execution_running_and_the_rest_go_on(
    database: Database, make_worker
) -> None:
    seeded = seed(database, spec=SPEC, count=6)
    broken = seeded.execution_ids[2]
    dispatcher = GatedDispatcher(fail_for={broken})
    dispatcher.gate.set()
    worker = make_worker(worker_max_concurrent=2, dispatchers={"HTTP": dispatcher})

    while worker.run_once():
        assert worker.drain(10)

    assert worker.in_flight == 0  # the crashed one left the window too
    assert statuses(database, [broken]) == {"RUNNING": 1}  # the reclaimer's to retry
    others = [e for e in seeded.execution_ids if e != broken]
    assert statuses(database, others) == {"SUCCESS": 5}
    assert worker.counts()["succeeded"] == 5


def test_closing_with_abandon_cancels_deliveries_and_leaves_them_running(
    database: Database, make_worker
) -> None:
    seeded = seed(database, spec=SPEC, count=5)
    dispatcher = GatedDispatcher()  # the gate never opens
    worker = make_worker(worker_max_concurrent=5, dispatchers={"HTTP": dispatcher})

    worker.run_once()
    wait_until(lambda: dispatcher.running == 5)
    assert not worker.drain(0.2)
    worker.stop()
    worker.close(abandon=True)

    assert dispatcher.running == 0  # every delivery task was cancelled
    assert worker.in_flight == 0
    assert statuses(database, seeded.execution_ids) == {"RUNNING": 5}
