"""What a worker holds: slots held until recorded, per-endpoint shares, lease deadlines."""

from __future__ import annotations

from collections.abc import Callable

from chalicelib.worker.holdings import Holdings
from tests.support.clock import FakeClock
from tests.support.seed.worker import claimed_execution as claimed

#: Where the holdings' clock starts (the tests' hand-outs are at 100).
START = 100.0


def still() -> Callable[[], float]:
    """A clock no test moves, at :data:`START`."""
    return FakeClock(monotonic_start=START).monotonic


def holdings(clock: FakeClock | None = None) -> Holdings:
    ticking = clock or FakeClock(monotonic_start=START)
    return Holdings(capacity=4, default_cap=2, lease_sec=30, clock=ticking.monotonic)


def test_a_slot_is_free_again_when_the_attempt_is_released_not_when_delivered() -> None:
    h = holdings()  # capacity 4
    h.add([claimed("e1", "a"), claimed("e2", "a")], sent_at=100)
    assert (h.capacity - len(h), h.claimable()) == (2, 2)
    h.delivered("e1", 1, slot=True)  # sent; its result waits for the finalizer
    assert (h.capacity - len(h), h.claimable()) == (2, 3)  # its slot frees at the next commit
    assert h.release("e1", 1) is True  # recorded: its delivery slot is free
    assert h.release("e1", 1) is False
    assert (h.capacity - len(h), h.claimable()) == (3, 3)


def test_what_awaits_its_record_is_counted_from_the_delivery_end_to_the_release() -> None:
    h = holdings()
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
    h = Holdings(capacity=8, default_cap=2, lease_sec=30, clock=still())  # reserve: 2 slots
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
    h = holdings(clock)
    h.add([claimed("e1", "a")], sent_at=100)
    clock.set_monotonic(126.9)
    assert h.owned("e1")
    clock.set_monotonic(127.1)  # within a tenth of the lease of its end
    assert not h.owned("e1")
    assert not h.owned("unknown")


def test_renewal_extends_what_is_kept_and_marks_the_rest_lost() -> None:
    clock = FakeClock(monotonic_start=START)
    h = holdings(clock)
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
    h = holdings()
    h.add([claimed("e1", "a", attempt=1)], 100)
    h.add([claimed("e1", "a", attempt=2)], 101)
    h.release("e1", 1)
    assert len(h) == 1 and h.owned("e1")
    assert h.limits().busy == {"a": 1}
    h.release("e1", 2)
    assert len(h) == 0


def test_a_claim_may_take_the_slots_being_recorded_once() -> None:
    h = holdings()  # capacity 4
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
    h = Holdings(capacity=50, default_cap=25, lease_sec=30, clock=still())
    h.add([claimed(f"a{i}", "busy") for i in range(39)], 100)
    assert h.limits().default_cap == 40 and h.limits().full == ()
    h.add([claimed("a39", "busy")], 100)
    assert h.limits().full == ("busy",)  # at 40: the last 10 slots are the reserve
    assert h.claimable() == 10


def test_another_endpoint_with_work_gets_the_reserve_then_its_share() -> None:
    clock = FakeClock(monotonic_start=START)
    h = Holdings(capacity=50, default_cap=25, lease_sec=30, clock=clock.monotonic)
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
    h = Holdings(capacity=50, default_cap=25, lease_sec=30, clock=clock.monotonic)
    h.add([claimed("a0", "busy")], 100)
    h.add([claimed("b0", "other")], 100)
    h.delivered("b0", 1)
    assert h.limits().default_cap == 25  # "other" was claimed a moment ago
    clock.advance(seconds=2)  # more than CONTENTION_SEC without a claim of "other"
    assert h.limits().default_cap == 40


def test_an_endpoints_max_concurrent_is_kept_whatever_the_contention() -> None:
    h = Holdings(capacity=50, default_cap=25, lease_sec=30, clock=still())
    h.add([claimed(f"a{i}", "capped", cap=3) for i in range(3)], 100)
    assert h.limits().full == ("capped",)
    h.add([claimed("a3", "capped", cap=None)], 100)  # max_concurrent removed since
    assert h.cap("capped") == 40


def test_the_room_a_lone_endpoint_at_its_cap_leaves_is_the_reserve() -> None:
    """What the endpoints with work here may still take of a claim's room; the rest only
    other endpoints' work may take. Where the refill takes the recording slots (PostgreSQL)
    an endpoint's room is its cap less all it holds, else less what is in delivery."""
    h = Holdings(capacity=50, default_cap=25, lease_sec=30, clock=still())
    assert h.usable(50, recording=False) == 40  # no endpoint has work: any may take it
    h.add([claimed(f"a{i}", "busy") for i in range(40)], 100)  # at its cap: every slot
    assert h.usable(h.free(), recording=False) == 0  # but the reserve of 10
    h.delivered("a0", 1, slot=True)  # its attempt is being recorded
    h.delivered("a1", 1, slot=True)
    assert h.usable(h.free(), recording=False) == 0  # the refill's, not the loop's
    assert h.usable(h.claimable(), recording=True) == 2  # 12 claimable, 2 of them its own
    h.release("a0", 1)
    assert h.usable(h.free(), recording=False) == 1
