"""The worker's ring on the in-memory store: the real Claimer, Starter, DeliveryLoop,
Finalizer, Ledger and LeaseKeeper, built by ``build_worker`` as the deployed worker is, over
:class:`~chalicelib.worker.memory.InMemoryStore` and a dispatcher that answers in the
delivery loop (no sockets). The store's and the pipeline's clock is a FakeClock; the only
waits are for the work to end, each bounded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from chalicelib.domain.delivery import (
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)
from chalicelib.wiring.worker import build_worker
from chalicelib.worker import Worker
from tests.support.clock import FakeClock
from tests.support.seed.worker import BOX, retry_policy
from tests.support.store_kit import MemoryKit
from tests.support.waiting import wait_for
from tests.support.worker_runs import settings

#: Every wait in these tests: for the work to end, never for time to pass.
BOUND = 5.0


class InProcessDispatcher:
    """Answers on the delivery loop itself: what it was sent (execution, attempt), how many
    ran at once at most; a 503 for the first attempt of ``fail_first``; with ``gated``,
    every delivery waits until :meth:`open`."""

    def __init__(self, *, fail_first: tuple[str, ...] = (), gated: bool = False) -> None:
        self.sent: list[tuple[str, int]] = []
        self.running = 0
        self.peak = 0
        self._fail_first = set(fail_first)
        self._lock = threading.Lock()
        self._opened = not gated
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self) -> None:
        with self._lock:
            self._opened = True
            if self._loop is not None and self._gate is not None:
                self._loop.call_soon_threadsafe(self._gate.set)

    async def _wait_for_the_gate(self) -> None:
        with self._lock:
            if self._opened:
                return
            if self._gate is None:
                self._loop, self._gate = asyncio.get_running_loop(), asyncio.Event()
            gate = self._gate
        await gate.wait()

    async def dispatch_async(self, request: DeliveryRequest) -> DeliveryOutcome:
        self.running += 1  # only touched on the loop's thread
        self.peak = max(self.peak, self.running)
        try:
            await self._wait_for_the_gate()
            self.sent.append((request.execution_id, request.attempt))
            if request.attempt == 1 and request.execution_id in self._fail_first:
                return failed(DeliveryErrorType.HTTP_ERROR, "unavailable", status_code=503)
            return succeeded({"status_code": 200})
        finally:
            self.running -= 1

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        raise AssertionError("the delivery loop uses dispatch_async")

    def close(self) -> None:
        pass


@pytest.fixture
def kit() -> MemoryKit:
    return MemoryKit(FakeClock())


@pytest.fixture
def make_worker(kit: MemoryKit) -> Iterator[Callable[..., Worker]]:
    built: list[Worker] = []

    def make(dispatcher: InProcessDispatcher, *, capacity: int, **kwargs: Any) -> Worker:
        worker = build_worker(
            settings=settings(
                worker_max_concurrent=capacity,
                worker_endpoint_share=1.0,
                worker_poll_interval_ms=10,
                wakeup_notify="off",
            ),
            store=kit.store("ring"),
            secret_box=lambda: BOX,
            dispatchers={"HTTP": dispatcher},
            clock=kit.clock,
            rand=lambda: 0.5,
            **kwargs,
        )
        built.append(worker)
        return worker

    yield make
    for worker in built:
        worker.stop()
        worker.close(abandon=worker.in_flight > 0)


@contextmanager
def ring(worker: Worker) -> Iterator[None]:
    """The worker's ring running (Worker.run on a thread) while the block runs."""
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), name="ring")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(BOUND)


def statuses(kit: MemoryKit, ids: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for execution_id in ids:
        status = kit.read(execution_id).status
        counts[status] = counts.get(status, 0) + 1
    return counts


def settled(kit: MemoryKit, ids: list[str], expected: dict[str, int]) -> None:
    wait_for(lambda: statuses(kit, ids), f"{expected}", until=expected.__eq__, timeout=BOUND)


def test_the_ring_delivers_every_execution_once(kit: MemoryKit, make_worker) -> None:
    endpoint = kit.endpoint()
    ids = [kit.execution(endpoint) for _ in range(30)]
    dispatcher = InProcessDispatcher()
    worker = make_worker(dispatcher, capacity=4)

    with ring(worker):
        settled(kit, ids, {"SUCCESS": 30})
    assert worker.drain(BOUND)
    assert sorted(dispatcher.sent) == sorted((e, 1) for e in ids)  # each once
    assert worker.counts()["succeeded"] == 30 and worker.in_flight == 0
    assert all(kit.read(e).attempts == ((1, "SUCCESS"),) for e in ids)


def test_the_ring_never_sends_more_than_its_capacity_at_once(kit: MemoryKit, make_worker) -> None:
    endpoint = kit.endpoint()
    ids = [kit.execution(endpoint) for _ in range(10)]
    dispatcher = InProcessDispatcher(gated=True)
    worker = make_worker(dispatcher, capacity=3)

    assert worker.run_once() == 3
    wait_for(lambda: dispatcher.running, "3 in delivery", until=(3).__eq__, timeout=BOUND)
    assert worker.run_once() == 0  # no free slot: nothing more is claimed
    assert statuses(kit, ids) == {"RUNNING": 3, "QUEUED": 7}
    assert worker.in_flight == 3

    dispatcher.open()
    with ring(worker):
        settled(kit, ids, {"SUCCESS": 10})
    assert dispatcher.peak == 3
    assert len(dispatcher.sent) == 10


def test_the_finalizer_refills_the_slots_it_frees(kit: MemoryKit, make_worker) -> None:
    """One claim of the claimer's own, then every other execution comes from the refills
    the finalizer claims where it records."""
    endpoint = kit.endpoint()
    ids = [kit.execution(endpoint) for _ in range(12)]
    dispatcher = InProcessDispatcher()
    worker = make_worker(dispatcher, capacity=2)

    with worker.room.refilling(lambda: False):  # as while the claimer runs
        assert worker.run_once() == 2
        settled(kit, ids, {"SUCCESS": 12})
    assert worker.drain(BOUND)
    assert worker.refills >= 1
    assert sorted(dispatcher.sent) == sorted((e, 1) for e in ids)
    assert worker.counts()["claimed"] == 12


def test_a_failed_attempt_is_retried_once_its_delay_has_passed(kit: MemoryKit, make_worker) -> None:
    endpoint = kit.endpoint(policy=retry_policy(max_attempts=3, initial_delay_ms=60_000))
    execution = kit.execution(endpoint)
    dispatcher = InProcessDispatcher(fail_first=(execution,))
    worker = make_worker(dispatcher, capacity=2)

    with ring(worker):
        settled(kit, [execution], {"RETRYING": 1})
        state = kit.read(execution)
        assert state.attempts == ((1, "FAILED"),) and state.run_at_in == 60.0
        kit.clock.advance(61)  # the store's clock: now it is due
        settled(kit, [execution], {"SUCCESS": 1})
    assert dispatcher.sent == [(execution, 1), (execution, 2)]
    assert kit.read(execution).attempts == ((1, "FAILED"), (2, "SUCCESS"))
    assert worker.counts()["retrying"] == 1 and worker.counts()["succeeded"] == 1


def test_a_delivery_whose_lease_was_lost_is_not_recorded(kit: MemoryKit, make_worker) -> None:
    """The reclaimer took one execution back while it was in delivery: the next renewal
    finds its lease lost, and its result, when it comes, changes nothing; the other one's
    lease is renewed and its result recorded."""
    endpoint = kit.endpoint()
    lost, kept = kit.execution(endpoint, due_in=-2), kit.execution(endpoint, due_in=-1)
    dispatcher = InProcessDispatcher(gated=True)
    worker = make_worker(dispatcher, capacity=2, monotonic=kit.clock.monotonic)

    assert worker.run_once() == 2
    wait_for(lambda: dispatcher.running, "2 in delivery", until=(2).__eq__, timeout=BOUND)
    kit.take_back(lost)
    kit.clock.advance(worker.ledger.lease_sec / 3 + 1)  # a renewal round is due
    assert worker.leases.renew_once() == [lost]
    assert not worker.ledger.owned(lost) and worker.ledger.owned(kept)
    renewed = kit.read(kept).lease_in
    assert renewed is not None and renewed == worker.ledger.lease_sec

    dispatcher.open()
    settled(kit, [kept], {"SUCCESS": 1})
    # (Not Worker.drain: its deadline is on the ledger's clock, frozen here.)
    wait_for(lambda: worker.in_flight, "both released", until=(0).__eq__, timeout=BOUND)
    state = kit.read(lost)
    assert (state.status, state.worker_id, state.attempts) == ("RETRYING", None, ())
    assert worker.counts()["succeeded"] == 1
