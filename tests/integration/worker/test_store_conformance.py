"""The worker's two stores keep the same rules: each scenario runs on PostgresStore (the
test database, the run's claim strategy) and on InMemoryStore (a FakeClock).

What the stages count on of a store (:class:`chalicelib.worker.store.WorkerStore`): claims
take due work oldest first up to the room, never twice, never a paused or held endpoint's,
within each endpoint's share; a record moves only what this worker holds, writes the
attempt, schedules a retry, holds and pauses endpoints, and refills the room it frees in
the same call; renewals keep only this worker's leases; the controlled endpoints are the
paused, held and flow-controlled ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chalicelib.domain.clock import utcnow
from chalicelib.domain.statuses import ExecutionStatus
from chalicelib.worker.models import ClaimedExecution
from chalicelib.worker.store import ClaimLimits, ClaimPlan, Recording, WorkerStore
from tests.support.store_kit import MemoryKit, PostgresKit, StoreKit, finished


@pytest.fixture(params=["memory", "postgres"])
def kit(request: pytest.FixtureRequest) -> Iterator[StoreKit]:
    if request.param == "memory":
        yield MemoryKit()
    else:
        yield PostgresKit(request.getfixturevalue("database"))


def plan(room: int, **limits: object) -> ClaimPlan:
    return ClaimPlan(room, ClaimLimits(**limits), started=0.0)  # type: ignore[arg-type]


def ids(claimed: list[ClaimedExecution]) -> list[str]:
    return [c.execution_id for c in claimed]


def record(
    store: WorkerStore, claimed: ClaimedExecution, status: ExecutionStatus, **fields: object
) -> set[str]:
    result = finished(claimed, status, at=utcnow(), **fields)  # type: ignore[arg-type]
    recorded, taken = store.record(Recording.of([result]), None)
    assert taken == []
    return recorded


# -- claims --------------------------------------------------------------------------------


def test_a_claim_takes_the_oldest_due_first_up_to_its_room(kit: StoreKit) -> None:
    endpoint = kit.endpoint()
    newest = kit.execution(endpoint, due_in=-1)
    oldest = kit.execution(endpoint, due_in=-30)
    middle = kit.execution(endpoint, due_in=-10)
    recent = kit.execution(endpoint, due_in=-5)  # added last, due before the newest
    store = kit.store("w-a")

    first = store.claim(plan(2))
    assert set(ids(first)) == {oldest, middle}  # the oldest two, in no promised order
    assert [c.attempt for c in first] == [1, 1]
    assert kit.read(oldest).status == "RUNNING" and kit.read(oldest).worker_id == "w-a"
    assert kit.read(newest).status == "QUEUED"
    assert ids(store.claim(plan(1))) == [recent]
    assert ids(store.claim(plan(2))) == [newest]
    assert store.claim(plan(2)) == []  # never twice


def test_two_workers_claiming_at_once_never_take_one_execution_twice(kit: StoreKit) -> None:
    endpoint = kit.endpoint()
    seeded = {kit.execution(endpoint) for _ in range(12)}
    stores = [kit.store("w-a"), kit.store("w-b")]
    start = threading.Barrier(2)
    taken: list[list[str]] = [[], []]

    def claim(i: int) -> None:
        start.wait(5)
        while batch := stores[i].claim(plan(2)):
            taken[i].extend(ids(batch))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    everything = taken[0] + taken[1]
    assert sorted(everything) == sorted(seeded)  # each once, by one of them
    for i, worker in enumerate(("w-a", "w-b")):
        assert {kit.read(e).worker_id for e in taken[i]} <= {worker}


def test_a_claim_passes_over_what_is_not_due(kit: StoreKit) -> None:
    endpoint = kit.endpoint()
    later = kit.execution(endpoint, due_in=60)
    due = kit.execution(endpoint, due_in=-1)
    assert ids(kit.store("w-a").claim(plan(5))) == [due]
    assert kit.read(later).status == "QUEUED"


def test_a_claim_passes_over_a_paused_endpoint_even_unlisted(kit: StoreKit) -> None:
    paused, live = kit.endpoint(), kit.endpoint()
    kit.execution(paused, due_in=-30)
    due = kit.execution(live)
    kit.pause(paused)
    assert ids(kit.store("w-a").claim(plan(5))) == [due]


def test_a_claim_passes_over_a_held_endpoint_until_its_hold_ends(kit: StoreKit) -> None:
    held, ended, live = kit.endpoint(), kit.endpoint(), kit.endpoint()
    kit.execution(held, due_in=-30)
    after_hold = kit.execution(ended, due_in=-20)
    due = kit.execution(live)
    kit.hold(held, 60)
    kit.hold(ended, -1)  # a hold that has run out binds nothing
    assert set(ids(kit.store("w-a").claim(plan(5)))) == {after_hold, due}


def test_a_claim_takes_each_endpoint_s_share_and_no_more(kit: StoreKit) -> None:
    capped, other, busy = kit.endpoint(max_concurrent=2), kit.endpoint(), kit.endpoint()
    for _ in range(4):
        kit.execution(capped, due_in=-30)
        kit.execution(other, due_in=-20)
        kit.execution(busy, due_in=-10)
    limits = {"default_cap": 3, "busy": {busy: 2}}
    claimed = kit.store("w-a").claim(plan(20, **limits))
    taken = [c.endpoint for c in claimed]
    # capped: its own max_concurrent; other: the default cap; busy: the default cap less
    # the two it delivers here.
    assert (taken.count(capped), taken.count(other), taken.count(busy)) == (2, 3, 1)


def test_a_claim_takes_less_by_the_room_of_claims_in_flight_and_none_of_full_endpoints(
    kit: StoreKit,
) -> None:
    full, open_ = kit.endpoint(), kit.endpoint()
    for _ in range(4):
        kit.execution(full, due_in=-30)
        kit.execution(open_, due_in=-20)
    claimed = kit.store("w-a").claim(plan(20, default_cap=3, pending=1, full=(full,)))
    assert [c.endpoint for c in claimed] == [open_, open_]


# -- records -------------------------------------------------------------------------------


def test_a_success_is_recorded_with_its_attempt(kit: StoreKit) -> None:
    execution = kit.execution(kit.endpoint())
    store = kit.store("w-a")
    [claimed] = store.claim(plan(1))
    assert record(store, claimed, ExecutionStatus.SUCCESS) == {execution}
    state = kit.read(execution)
    assert (state.status, state.attempts) == ("SUCCESS", ((1, "SUCCESS"),))
    # Recorded twice (a retry after a lost answer): nothing moves the second time.
    assert record(store, claimed, ExecutionStatus.SUCCESS) == set()
    assert kit.read(execution).attempts == ((1, "SUCCESS"),)


def test_a_retry_is_due_after_its_delay_and_claimed_as_the_next_attempt(kit: StoreKit) -> None:
    execution = kit.execution(kit.endpoint())
    store = kit.store("w-a")
    [claimed] = store.claim(plan(1))
    assert record(store, claimed, ExecutionStatus.RETRYING, retry_delay_ms=60_000) == {execution}
    state = kit.read(execution)
    assert (state.status, state.worker_id, state.attempts) == ("RETRYING", None, ((1, "FAILED"),))
    assert 50 < state.run_at_in <= 60
    assert store.claim(plan(1)) == []  # not due yet

    retried = kit.execution(kit.endpoint())  # the same path with no delay
    [first] = store.claim(plan(1))
    record(store, first, ExecutionStatus.RETRYING, retry_delay_ms=0)
    [second] = store.claim(plan(1))
    assert (second.execution_id, second.attempt) == (retried, 2)


def test_a_failure_is_final(kit: StoreKit) -> None:
    execution = kit.execution(kit.endpoint())
    store = kit.store("w-a")
    [claimed] = store.claim(plan(1))
    assert record(store, claimed, ExecutionStatus.FAILED) == {execution}
    assert kit.read(execution).status == "FAILED"
    assert store.claim(plan(1)) == []


def test_a_record_of_what_another_worker_holds_changes_nothing(kit: StoreKit) -> None:
    execution = kit.execution(kit.endpoint())
    [claimed] = kit.store("w-a").claim(plan(1))
    assert record(kit.store("w-b"), claimed, ExecutionStatus.SUCCESS) == set()
    state = kit.read(execution)
    assert (state.status, state.worker_id, state.attempts) == ("RUNNING", "w-a", ())


def test_a_record_of_an_execution_taken_back_changes_nothing(kit: StoreKit) -> None:
    execution = kit.execution(kit.endpoint())
    store = kit.store("w-a")
    [claimed] = store.claim(plan(1))
    kit.take_back(execution)
    assert record(store, claimed, ExecutionStatus.SUCCESS) == set()
    assert (kit.read(execution).status, kit.read(execution).attempts) == ("RETRYING", ())


def test_a_record_holds_an_endpoint_and_pauses_one_that_is_gone(kit: StoreKit) -> None:
    held, gone, live = kit.endpoint(), kit.endpoint(), kit.endpoint()
    for endpoint in (held, gone):
        kit.execution(endpoint, due_in=-30)
        kit.execution(endpoint, due_in=-20)
    store = kit.store("w-a")
    first = store.claim(plan(2))
    assert sorted(c.endpoint for c in first) == sorted([held, gone])
    at = utcnow()
    results = [
        finished(first[0], ExecutionStatus.RETRYING, retry_delay_ms=0, at=at, hold_ms=60_000)
        if first[0].endpoint == held
        else finished(first[0], ExecutionStatus.FAILED, at=at, gone=True),
        finished(first[1], ExecutionStatus.RETRYING, retry_delay_ms=0, at=at, hold_ms=60_000)
        if first[1].endpoint == held
        else finished(first[1], ExecutionStatus.FAILED, at=at, gone=True),
    ]
    recorded, _ = store.record(Recording.of(results), None)
    assert recorded == set(ids(first))
    assert store.controlled().excluded == tuple(sorted([held, gone]))
    due = kit.execution(live)
    assert ids(store.claim(plan(5))) == [due]


def test_a_record_with_a_plan_refills_the_room_it_frees_in_the_same_call(kit: StoreKit) -> None:
    endpoint = kit.endpoint()
    first, second, third = (kit.execution(endpoint, due_in=-30 + i) for i in range(3))
    store = kit.store("w-a")
    [claimed] = store.claim(plan(1))
    assert claimed.execution_id == first
    result = finished(claimed, ExecutionStatus.SUCCESS, at=utcnow())
    recording = Recording.of([result])
    assert recording.alone  # PostgreSQL: one statement records and claims
    recorded, refill = store.record(recording, plan(2))
    assert recorded == {first}
    assert set(ids(refill)) == {second, third}
    assert [kit.read(e).status for e in (first, second, third)] == ["SUCCESS", "RUNNING", "RUNNING"]


# -- leases and controls ------------------------------------------------------------------


def test_a_renewal_keeps_only_this_worker_s_running_leases(kit: StoreKit) -> None:
    endpoint = kit.endpoint()
    mine, taken_back, theirs = (kit.execution(endpoint, due_in=-30 + i) for i in range(3))
    store, other = kit.store("w-a"), kit.store("w-b")
    assert set(ids(store.claim(plan(2, lease_ms=5_000)))) == {mine, taken_back}
    assert ids(other.claim(plan(1, lease_ms=5_000))) == [theirs]
    kit.take_back(taken_back)
    assert store.renew([mine, taken_back, theirs], 600_000) == {mine}
    lease = kit.read(mine).lease_in
    assert lease is not None and lease > 500
    other_lease = kit.read(theirs).lease_in
    assert other_lease is not None and other_lease <= 5


def test_the_controlled_endpoints_are_the_paused_held_and_flow_controlled(kit: StoreKit) -> None:
    paused, held, metered, expired, plain = (kit.endpoint() for _ in range(5))
    kit.pause(paused)
    kit.hold(held, 60)
    kit.hold(expired, -1)
    kit.flow_control(metered)
    controlled = kit.store("w-a").controlled()
    assert controlled.excluded == tuple(sorted([paused, held, metered]))
    assert controlled.metered == (metered,)
    assert plain not in controlled.excluded
