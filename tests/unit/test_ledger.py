"""A worker's claims: slots held until recorded, per-endpoint shares, lease deadlines."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus
from chalicelib.worker.idle import IdleWait
from chalicelib.worker.ledger import Claims, Ledger, SendSlots
from chalicelib.worker.models import FinishedExecution
from tests.support.clock import FakeClock
from tests.support.seed.worker import claimed_execution as claimed

#: Where the ledger's clock starts (the tests' hand-outs are at 100).
START = 100.0


def still() -> Callable[[], float]:
    """A ledger clock no test moves, at :data:`START`."""
    return FakeClock(monotonic_start=START).monotonic


def claims(clock: FakeClock | None = None) -> Claims:
    ticking = clock or FakeClock(monotonic_start=START)
    return Claims(capacity=4, default_cap=2, lease_sec=30, clock=ticking.monotonic)


def test_a_slot_is_free_again_when_the_attempt_is_released_not_when_delivered() -> None:
    h = claims()  # capacity 4
    h.add([claimed("e1", "a"), claimed("e2", "a")], sent_at=100)
    assert (h.capacity - len(h), h.claimable()) == (2, 2)
    h.delivered("e1", 1, slot=True)  # sent; its result waits for the finalizer
    assert (h.capacity - len(h), h.claimable()) == (2, 3)  # its slot frees at the next commit
    assert h.release("e1", 1) is True  # recorded: its delivery slot is free
    assert h.release("e1", 1) is False
    assert (h.capacity - len(h), h.claimable()) == (3, 3)


def test_what_awaits_its_record_is_counted_from_the_delivery_end_to_the_release() -> None:
    h = claims()
    h.add([claimed("e1", "a"), claimed("e2", "a"), claimed("e3", "b")], sent_at=100)
    assert (len(h), h.awaiting_record) == (3, 0)  # all three in delivery
    h.delivered("e1", 1, slot=True)  # sent, its result on its way to the finalizer
    h.delivered("e3", 1)  # finished unsent (a template that does not resolve): recorded too
    assert (len(h), h.awaiting_record) == (3, 2)
    h.delivered("e1", 1, slot=True)  # told twice: counted once
    assert h.awaiting_record == 2
    h.release("e1", 1)
    h.release("e3", 1)
    assert (len(h), h.awaiting_record) == (1, 0)
    h.release("e2", 1)  # left RUNNING for the reclaimer before its delivery ended
    assert (len(h), h.awaiting_record) == (0, 0)


def test_an_endpoint_at_its_cap_is_full_until_a_delivery_ends() -> None:
    h = Claims(capacity=8, default_cap=2, lease_sec=30, clock=still())  # reserve: 2 slots
    h.add([claimed("e1", "hung"), claimed("e2", "hung"), claimed("e3", "slow", cap=3)], 100)
    limits = h.limits()
    assert limits.full == ("hung",)  # default cap 2
    assert limits.busy == {"hung": 2, "slow": 1}
    assert (limits.default_cap, limits.lease_ms) == (2, 30_000)
    h.delivered("e1", 1)
    assert h.limits().full == ()  # the share frees at delivery, the slot at release
    assert h.limits().busy == {"hung": 1, "slow": 1}


def test_a_send_needs_the_lease_with_a_margin() -> None:
    clock = FakeClock(monotonic_start=START)
    h = claims(clock)
    h.add([claimed("e1", "a")], sent_at=100)
    clock.set_monotonic(126.9)
    assert h.owned("e1")
    clock.set_monotonic(127.1)  # within a tenth of the lease of its end
    assert not h.owned("e1")
    assert not h.owned("unknown")


def test_renewal_extends_what_is_kept_and_marks_the_rest_lost() -> None:
    clock = FakeClock(monotonic_start=START)
    h = claims(clock)
    h.add([claimed("e1", "a"), claimed("e2", "a")], sent_at=100)
    assert h.due_for_renewal() == []  # fresh leases
    clock.set_monotonic(110.1)  # a third of the lease has passed
    assert sorted(h.due_for_renewal()) == ["e1", "e2"]
    assert h.renewed(["e1", "e2"], kept={"e1"}, sent_at=110) == ["e2"]
    clock.set_monotonic(135)
    assert h.owned("e1") and not h.owned("e2")
    assert h.due_for_renewal() == ["e1"]  # a lost one is not asked for again


def test_release_of_an_older_attempt_keeps_the_new_claim() -> None:
    """A reclaimed execution claimed again by the same worker: the lost attempt's end must
    not free the new attempt's slot."""
    h = claims()
    h.add([claimed("e1", "a", attempt=1)], 100)
    h.add([claimed("e1", "a", attempt=2)], 101)
    h.release("e1", 1)
    assert len(h) == 1 and h.owned("e1")
    assert h.limits().busy == {"a": 1}
    h.release("e1", 2)
    assert len(h) == 0


def test_a_claim_may_take_the_slots_being_recorded_once() -> None:
    h = claims()  # capacity 4
    h.add([claimed("e1", "a"), claimed("e2", "a"), claimed("e3", "b")], sent_at=100)
    assert h.claimable() == 1  # one free slot; three in delivery
    h.delivered("e1", 1, slot=True)
    h.delivered("e2", 1, slot=True)
    assert (h.capacity - len(h), h.claimable()) == (1, 3)  # two more free at the finalizer's commit
    h.add([claimed("e4", "b"), claimed("e5", "b"), claimed("e6", "b")], sent_at=101)
    assert (len(h), h.claimable()) == (6, 0)  # one batch waits for slots: nothing more
    h.release("e1", 1)
    h.release("e2", 1)
    assert (len(h), h.claimable()) == (4, 0)  # at capacity, four in delivery
    h.delivered("e3", 1, slot=True)
    assert h.claimable() == 1


def test_a_lone_endpoint_may_use_every_slot_but_the_reserve() -> None:
    """Work-conserving fairness: with nothing else to do, an endpoint is not held to its
    share; a reserve of at least one slot stays for any other endpoint."""
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    h.add([claimed(f"a{i}", "busy") for i in range(39)], 100)
    assert h.limits().default_cap == 40 and h.limits().full == ()
    h.add([claimed("a39", "busy")], 100)
    assert h.limits().full == ("busy",)  # at 40: the last 10 slots are the reserve
    assert h.claimable() == 10


def test_another_endpoint_with_work_gets_the_reserve_then_its_share() -> None:
    clock = FakeClock(monotonic_start=START)
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=clock.monotonic)
    h.add([claimed(f"a{i}", "busy") for i in range(40)], 100)
    assert h.in_reserve() and h.entry_cap == 2
    assert h.batch(10) == 2  # the reserve in slices: never all of it to one endpoint
    h.add([claimed(f"b{i}", "other") for i in range(2)], 100)  # a slice of the reserve
    limits = h.limits()
    assert limits.default_cap == 2  # while the reserve is in use, every cap is a slice
    assert limits.full == ("busy", "other")  # a third endpoint still finds room
    assert h.batch(8) == 2
    for i in range(16):  # the busy endpoint's deliveries end: back below the reserve
        h.delivered(f"a{i}", 1)
    assert not h.in_reserve() and h.limits().default_cap == 25  # two with work: shares
    assert h.room("busy") == 1 and "busy" not in h.limits().full
    assert h.room("other") == 23
    assert h.batch(24) == 40 - 26  # what leaves the reserve free


def test_the_share_lifts_once_the_other_endpoint_has_had_no_work_for_a_while() -> None:
    clock = FakeClock(monotonic_start=START)
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=clock.monotonic)
    h.add([claimed("a0", "busy")], 100)
    h.add([claimed("b0", "other")], 100)
    h.delivered("b0", 1)
    assert h.limits().default_cap == 25  # "other" was claimed a moment ago
    clock.advance(seconds=2)  # more than CONTENTION_SEC without a claim of "other"
    assert h.limits().default_cap == 40


def test_an_endpoints_max_concurrent_is_kept_whatever_the_contention() -> None:
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    h.add([claimed(f"a{i}", "capped", cap=3) for i in range(3)], 100)
    assert h.limits().full == ("capped",)
    h.add([claimed("a3", "capped", cap=None)], 100)  # max_concurrent removed since
    assert h.cap("capped") == 40


def test_room_reserved_by_claims_in_flight_comes_off_the_room_and_every_share() -> None:
    h = claims()  # capacity 4
    h.add([claimed("e1", "a")], 100)
    ledger = Ledger(h, SendSlots(4), wake=lambda: None)
    assert ledger.room(())[0] == 2  # the fourth slot is the reserve
    room, limits = ledger.room((), pending=2)
    assert (room, limits.pending, limits.params()["pending"]) == (1, 2, 2)
    assert ledger.room((), pending=3)[0] == 0


def test_the_claimers_loop_leaves_the_recording_slots_to_the_refill() -> None:
    """Where the finalizer claims in the statement that records (PostgreSQL), the claimer's
    own loop takes only free slots; the refill takes those the record frees as well."""
    h = Claims(capacity=4, default_cap=4, lease_sec=30, clock=still())  # share 1: no reserve
    h.add([claimed("e1", "a"), claimed("e2", "a")], 100)
    h.delivered("e1", 1, slot=True)  # its attempt is being recorded
    ledger = Ledger(h, SendSlots(4), wake=lambda: None)
    assert ledger.room((), recording=False)[0] == 2  # the two free slots only
    assert ledger.room((), recording=True)[0] == 3  # and the one its record frees
    h.add([claimed("e3", "a"), claimed("e4", "a")], 100)  # every slot held, one recording
    assert (ledger.room((), recording=False)[0], ledger.room((), recording=True)[0]) == (0, 1)
    # No free slot: the loop waits (until stopped); counting the recording one, it claims.
    assert not ledger.wait_for_room(iter([False, True]).__next__, 0.01, recording=False)
    assert ledger.wait_for_room(iter([False, False, False, True]).__next__, 0.01)


def test_the_room_a_lone_endpoint_at_its_cap_leaves_is_the_reserve() -> None:
    """What the endpoints with work here may still take of a claim's room; the rest only
    other endpoints' work may take. Where the refill takes the recording slots (PostgreSQL)
    an endpoint's room is its cap less all it holds, else less what is in delivery."""
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    assert h.usable(50, recording=False) == 40  # no endpoint has work: any may take it
    h.add([claimed(f"a{i}", "busy") for i in range(40)], 100)  # at its cap: every slot
    assert h.usable(h.free(), recording=False) == 0  # but the reserve of 10
    h.delivered("a0", 1, slot=True)  # its attempt is being recorded
    h.delivered("a1", 1, slot=True)
    assert h.usable(h.free(), recording=False) == 0  # the refill's, not the loop's
    assert h.usable(h.claimable(), recording=True) == 2  # 12 claimable, 2 of them its own
    h.release("a0", 1)
    assert h.usable(h.free(), recording=False) == 1


def test_the_claimers_loop_looks_in_the_reserve_at_the_poll_interval_or_when_work_is_queued() -> (
    None
):
    """A lone endpoint at its cap: the loop does not claim on every slot that frees (a
    claim of its own for what the finalizer's refill fills), but once a poll interval, or
    at once when a notification says work was queued (which the reserve is for)."""
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    h.add([claimed(f"a{i}", "busy") for i in range(40)], 100)
    ledger = Ledger(h, SendSlots(50), wake=lambda: None)
    calls = 0

    def stop_on_second_look() -> bool:
        nonlocal calls
        calls += 1
        return calls > 1

    # A long poll interval: woken only to be stopped, it claims nothing.
    waiter = threading.Thread(
        target=lambda: results.append(
            ledger.wait_for_room(stop_on_second_look, 30.0, recording=False)
        )
    )
    results: list[bool] = []
    waiter.start()
    time.sleep(0.05)
    with ledger._cond:  # a slot freeing wakes the wait; it is still only the reserve
        ledger._cond.notify_all()
    waiter.join(5)
    assert results == [False]
    # A poll interval later it looks; a notification makes it look at once.
    assert ledger.wait_for_room(lambda: False, 0.01, recording=False)
    ledger.nudge()
    started = time.monotonic()
    assert ledger.wait_for_room(lambda: False, 30.0, recording=False)
    assert time.monotonic() - started < 5
    # Room of its own again (a delivery recorded): claimed after the linger, as before.
    h.delivered("a0", 1, slot=True)
    h.release("a0", 1)
    assert ledger.wait_for_room(lambda: False, 30.0, recording=False)


def test_a_notification_ends_the_idle_sleep_and_tells_the_ledger() -> None:
    idle = IdleWait(db=None, wakeup_notify="off")  # type: ignore[arg-type]
    told: list[bool] = []
    idle.on_queued = lambda: told.append(True)
    idle.notified()
    idle.sleep(30.0)  # ends at once: the notification came first
    assert (told, idle.stats.woken) == ([True], 1)


def test_send_slots_go_to_the_oldest_waiter_and_never_exceed_the_capacity() -> None:
    """Two slots, five deliveries: two go out, the others wait in order; slots given back
    from another thread (a recorded batch: one call for all of them) go to the oldest
    waiters, and what no one waits for is counted free."""
    order: list[int] = []
    holding: list[int] = []

    async def scenario() -> None:
        slots = SendSlots(2)
        loop = asyncio.get_running_loop()

        async def deliver(i: int) -> None:
            await slots.acquire()
            order.append(i)
            holding.append(i)
            assert len(holding) <= 2

        tasks = [asyncio.create_task(deliver(i)) for i in range(5)]
        await asyncio.sleep(0.01)
        assert order == [0, 1]
        holding.clear()
        await loop.run_in_executor(None, slots.give_back, 2)  # from the finalizer's thread
        await asyncio.sleep(0.01)
        assert order == [0, 1, 2, 3]
        holding.clear()
        slots.give_back(3)  # on the loop: one waiter, two slots left over
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3, 4]
        holding.clear()
        await asyncio.wait_for(slots.acquire(), 1)  # the two left over are free at once
        await asyncio.wait_for(slots.acquire(), 1)
        late = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.01)
        assert not late.done()  # and no more than that
        late.cancel()

    asyncio.run(scenario())


def test_a_slot_handed_to_a_cancelled_delivery_goes_to_the_next() -> None:
    async def scenario() -> None:
        slots = SendSlots(1)
        await slots.acquire()
        first = asyncio.create_task(slots.acquire())
        second = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.01)
        slots.give_back()  # handed to the first waiter, which is cancelled before it runs
        first.cancel()
        await asyncio.wait_for(second, 1)
        assert first.cancelled()

    asyncio.run(scenario())


class CountingSlots(SendSlots):
    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.given: list[int] = []

    def give_back(self, count: int = 1) -> None:
        self.given.append(count)


def finished(execution_id: str, endpoint: str) -> FinishedExecution:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return FinishedExecution(
        execution_id=execution_id,
        endpoint=endpoint,
        attempt_number=1,
        attempt_status=AttemptStatus.SUCCESS,
        next_status=ExecutionStatus.SUCCESS,
        started_at=at,
        completed_at=at,
        duration_ms=1,
    )


def test_a_recorded_batch_is_released_in_one_step() -> None:
    """The finalizer's batch leaves the ledger at once: each counted under its outcome (a
    result that lost its compare-and-set under none), and the send slots of those that
    were sent given back to the delivery loop in one call."""
    h = claims()
    h.add([claimed("e1", "a"), claimed("e2", "a"), claimed("e3", "b")], 100)
    h.delivered("e1", 1, slot=True)
    h.delivered("e2", 1, slot=True)
    h.delivered("e3", 1, slot=False)  # finished without a send: no send slot
    slots = CountingSlots(4)
    ledger = Ledger(h, slots, wake=lambda: None)
    ledger.recorded(
        [(finished("e1", "a"), True), (finished("e2", "a"), False), (finished("e3", "b"), True)]
    )
    assert len(h) == 0
    assert slots.given == [2]
    assert ledger.counts()["succeeded"] == 2


def _claim_as_the_sql_does(ledger: Ledger, due: list[tuple[str, str, int | None]]) -> list[str]:
    """One claim the way the "fair" part (parts.sql) takes it: the oldest due rows, per endpoint
    at most its cap (spec.max_concurrent, else the limits' default) less what it has in
    delivery, none of an endpoint in ``full``, at most the room; held in the ledger."""
    room, limits = ledger.room(())
    taken: list[tuple[str, str, int | None]] = []
    for row in due:
        _, endpoint, cap = row
        own = sum(1 for t in taken if t[1] == endpoint)
        allowed = (cap if cap is not None else limits.default_cap) - limits.busy.get(endpoint, 0)
        if len(taken) < room and endpoint not in limits.full and own < allowed:
            taken.append(row)
    for row in taken:
        due.remove(row)
    ledger.take([claimed(eid, endpoint, cap=cap) for eid, endpoint, cap in taken], 100)
    return [endpoint for _, endpoint, _ in taken]


def test_hung_endpoints_together_leave_the_reserve_to_one_that_comes_due_later() -> None:
    """Three endpoints whose targets hang (40 due each, claimed as they fall due) never
    hold more than every slot but the reserve between them: a fourth one's work, due last,
    is claimed at its first claim (no delivery ends meanwhile)."""
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    ledger = Ledger(h, SendSlots(50), wake=lambda: None)
    due = [(f"{name}-{i}", name, None) for name in ("h1", "h2", "h3") for i in range(40)]
    for _ in range(20):  # claim after claim, as the worker does while nothing ends
        _claim_as_the_sql_does(ledger, due)
    assert len(h) <= 50 - 10 + 2 * 2  # the hung ones: all but the reserve, and 2 slices of it
    due.append(("late-0", "late", None))
    assert _claim_as_the_sql_does(ledger, due) == ["late"]


def test_max_concurrent_never_takes_the_reserve() -> None:
    """An endpoint whose spec.max_concurrent is above the worker's capacity is held, like
    any other, to every slot but the reserve, and to a slice of it while it is in use."""
    h = Claims(capacity=50, default_cap=25, lease_sec=30, clock=still())
    ledger = Ledger(h, SendSlots(50), wake=lambda: None)
    due = [(f"big-{i}", "big", 10_000) for i in range(100)]
    assert _claim_as_the_sql_does(ledger, due) == ["big"] * 40
    assert h.cap("big") == h.entry_cap and h.limits().full == ("big",)
    assert _claim_as_the_sql_does(ledger, due) == []  # it alone: the reserve stays free
    due.insert(0, ("other-0", "other", None))
    assert _claim_as_the_sql_does(ledger, due) == ["other"]
